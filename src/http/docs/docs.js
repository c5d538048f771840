"use strict";
// Renders the API description served beside this page: operations by tag, their
// parameters, bodies, responses and schemas (references expand in place).
(function () {
  const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];
  let spec = null;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value; else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child == null) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  // Description text with its `code` spans as code; the rest stays text, never markup.
  function prose(text) {
    const fragment = document.createDocumentFragment();
    String(text || "").split(/`([^`]+)`/).forEach((part, i) => {
      if (part) fragment.append(i % 2 ? el("code", {}, part) : document.createTextNode(part));
    });
    return fragment;
  }

  function resolve(ref) {
    return ref.replace(/^#\//, "").split("/").reduce((at, key) => at && at[key], spec);
  }

  function typeOf(schema) {
    if (!schema) return "any";
    if (schema.$ref) return schema.$ref.split("/").pop();
    if (schema.const !== undefined) return JSON.stringify(schema.const);
    if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (schema.oneOf) return "one of";
    if (schema.anyOf) return "any of";
    if (schema.allOf) return "all of";
    const types = [].concat(schema.type || "any");
    if (types.includes("array")) return "array of " + typeOf(schema.items);
    return types.join(" | ") + (schema.format ? " (" + schema.format + ")" : "");
  }

  // A schema as nested, collapsible properties; `seen` stops recursive references.
  function renderSchema(schema, seen) {
    seen = seen || new Set();
    const box = el("div", { class: "schema" });
    if (!schema) return box;
    if (schema.$ref) {
      const name = schema.$ref.split("/").pop();
      if (seen.has(name)) { box.append(el("span", { class: "muted" }, name + " (see above)")); return box; }
      const target = resolve(schema.$ref);
      const inner = new Set(seen); inner.add(name);
      const details = el("details", {}, el("summary", {}, name));
      if (target && target.description) details.append(el("div", { class: "muted" }, prose(target.description)));
      details.append(renderSchema(target, inner));
      box.append(details);
      return box;
    }
    for (const key of ["oneOf", "anyOf", "allOf"]) {
      if (schema[key]) {
        box.append(el("div", { class: "muted" }, key));
        schema[key].forEach((part, i) => {
          const details = el("details", {}, el("summary", {}, (part.title || typeOf(part)) + " #" + (i + 1)));
          details.append(renderSchema(part, seen));
          box.append(details);
        });
      }
    }
    if (schema.items && (schema.items.$ref || schema.items.properties || schema.items.oneOf)) {
      box.append(el("div", { class: "muted" }, "items:"), renderSchema(schema.items, seen));
    }
    if (schema.properties) {
      const required = new Set(schema.required || []);
      const table = el("table", {});
      for (const [name, prop] of Object.entries(schema.properties)) {
        const cell = el("td", {}, typeOf(prop));
        if (prop.description) cell.append(el("div", { class: "muted" }, prose(prop.description)));
        if (prop.$ref || prop.properties || prop.oneOf || prop.allOf || (prop.items && prop.items.$ref)) {
          cell.append(renderSchema(prop.$ref || prop.properties || prop.oneOf || prop.allOf ? prop : prop.items, seen));
        }
        table.append(el("tr", {}, el("td", {}, el("code", {}, name), required.has(name) ? " *" : ""), cell));
      }
      box.append(table);
    } else if (!schema.oneOf && !schema.anyOf && !schema.allOf && !schema.items) {
      box.append(el("span", {}, typeOf(schema)));
    }
    return box;
  }

  function renderContent(content) {
    const box = el("div", {});
    for (const [type, media] of Object.entries(content || {})) {
      box.append(el("div", {}, el("code", {}, type)), renderSchema(media.schema));
    }
    return box;
  }

  function renderOperation(path, method, op) {
    const secured = (op.security || []).some((r) => Object.keys(r).length > 0);
    const summary = el("summary", {},
      el("span", { class: "method " + method }, method),
      el("span", { class: "path" }, path),
      el("span", { class: "summary" }, prose(op.summary)),
      secured ? el("span", { class: "lock" }, "token: " + (op.security || []).flatMap(Object.keys).join(" or ")) : null);
    const body = el("div", { class: "op-body" });
    if (op.description) body.append(el("p", {}, prose(op.description)));
    if (op.parameters && op.parameters.length) {
      const table = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "type"), el("th", {}, "description")));
      for (const p of op.parameters) {
        table.append(el("tr", {}, el("td", {}, el("code", {}, p.name), p.required ? " *" : ""), el("td", {}, p.in),
          el("td", {}, typeOf(p.schema)), el("td", {}, prose(p.description))));
      }
      body.append(el("h4", {}, "Parameters"), table);
    }
    if (op.requestBody) {
      body.append(el("h4", {}, "Request body" + (op.requestBody.required ? "" : " (optional)")));
      if (op.requestBody.description) body.append(el("p", { class: "muted" }, prose(op.requestBody.description)));
      body.append(renderContent(op.requestBody.content));
    }
    body.append(el("h4", {}, "Responses"));
    for (const [status, response] of Object.entries(op.responses || {})) {
      const resolved = response.$ref ? resolve(response.$ref) : response;
      const row = el("div", {}, el("span", { class: "status" }, status), " ", prose(resolved.description));
      if (resolved.headers) {
        row.append(el("div", { class: "muted" }, "headers: " + Object.keys(resolved.headers).join(", ")));
      }
      row.append(renderContent(resolved.content));
      body.append(row);
    }
    const details = el("details", { class: "op" }, summary, body);
    details.dataset.search = (method + " " + path + " " + (op.summary || "")).toLowerCase();
    return details;
  }

  function render() {
    document.title = spec.info.title + " API";
    document.getElementById("title").textContent = spec.info.title + " API " + spec.info.version;
    document.getElementById("description").replaceChildren(prose(spec.info.description));
    const byTag = new Map((spec.tags || []).map((t) => [t.name, []]));
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const method of METHODS) {
        if (!item[method]) continue;
        const tag = (item[method].tags || ["other"])[0];
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push(renderOperation(path, method, item[method]));
      }
    }
    const main = document.getElementById("operations");
    main.replaceChildren();
    const tags = new Map((spec.tags || []).map((t) => [t.name, t.description]));
    for (const [tag, ops] of byTag) {
      if (!ops.length) continue;
      main.append(el("h2", {}, tag));
      if (tags.get(tag)) main.append(el("p", { class: "muted" }, prose(tags.get(tag))));
      ops.forEach((op) => main.append(op));
    }
  }

  document.getElementById("filter").addEventListener("input", (event) => {
    const needle = event.target.value.toLowerCase();
    document.querySelectorAll("details.op").forEach((op) => {
      op.hidden = needle !== "" && !op.dataset.search.includes(needle);
    });
  });

  fetch("openapi.json")
    .then((response) => {
      if (!response.ok) throw new Error("GET openapi.json answered " + response.status);
      return response.json();
    })
    .then((document) => { spec = document; render(); })
    .catch((error) => {
      document.getElementById("operations").replaceChildren(el("p", {}, "Cannot load the API description: " + error.message));
    });
})();
