//! docker-compose.yml and the Dockerfile cannot run here; what they run can be checked: the
//! configuration they point at, and every setting they pass, are valid for this binary; the
//! replicas sit behind HAProxy, whose configuration HAProxy itself accepts.

use std::path::PathBuf;

use crate::process::agentry;

fn compose() -> String {
    std::fs::read_to_string("docker-compose.yml").expect("docker-compose.yml exists")
}

/// `AGENTRY__…` variable names set by the compose file.
fn compose_settings() -> Vec<String> {
    compose()
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .map(|(key, _)| key.trim().to_owned())
        .filter(|key| key.starts_with("AGENTRY__"))
        .collect()
}

#[test]
fn the_compose_configuration_is_valid_for_this_binary() {
    let settings = compose_settings();
    for expected in [
        "AGENTRY__DATABASE__URL",
        "AGENTRY__AUTH__ADMIN_SECRET",
        "AGENTRY__SECRETS__KEY",
    ] {
        assert!(
            settings.iter().any(|s| s == expected),
            "compose sets {expected}"
        );
    }
    let compose = compose();
    assert!(compose.contains("AGENTRY_CONFIG: /etc/agentry/docker.toml"));
    assert!(compose.contains("condition: service_healthy"));
    assert!(compose.contains("image: postgres:16"));

    // Every variable compose sets is a key this binary knows, with plausible values.
    let mut command = agentry("sqlite://unused.db");
    command.args(["config", "check", "--config", "config/docker.toml"]);
    for key in &settings {
        let value = match key.as_str() {
            "AGENTRY__DATABASE__URL" => {
                "postgres://agentry:pw@postgres:5432/agentry?sslmode=disable".to_owned()
            }
            "AGENTRY__SECRETS__KEY" => agentry::crypto::encode_key(&[1u8; 32]),
            "AGENTRY__AUTH__JWT_SECRET" => "j".repeat(40),
            _ => "some-value".to_owned(),
        };
        command.env(key, value);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_image_runs_the_binary_with_the_docker_configuration() {
    let dockerfile = std::fs::read_to_string("Dockerfile").unwrap();
    assert!(dockerfile.contains("ENV AGENTRY_CONFIG=/etc/agentry/docker.toml"));
    assert!(dockerfile.contains("COPY config /etc/agentry"));
    assert!(std::path::Path::new("config/docker.toml").is_file());
    assert!(dockerfile.contains("USER agentry"));
    assert!(dockerfile.contains("cargo build --release --locked"));
    // The build image's toolchain is at least the crate's rust-version.
    let manifest = std::fs::read_to_string("Cargo.toml").unwrap();
    let wanted = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    let image = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("FROM rust:"))
        .and_then(|l| l.split('-').next())
        .unwrap();
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
    assert!(version(image) >= version(wanted), "rust:{image} < {wanted}");
}

/// Cargo refuses a manifest whose declared targets are missing, so the build stage must copy
/// every file `Cargo.toml` names: the library, the binaries, the build script, the benches.
#[test]
fn the_build_stage_copies_every_target_the_manifest_declares() {
    let dockerfile = std::fs::read_to_string("Dockerfile").unwrap();
    let build_stage: Vec<&str> = dockerfile
        .split("\nFROM ")
        .nth(1)
        .expect("a build stage")
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len() - 1].to_vec()
        })
        .collect();
    let manifest = std::fs::read_to_string("Cargo.toml").unwrap();
    let mut needed = vec!["Cargo.toml".to_owned(), "Cargo.lock".to_owned()];
    if std::path::Path::new("build.rs").exists() {
        needed.push("build.rs".into());
    }
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if let Some(path) = line.strip_prefix("path = \"") {
            needed.push(path.trim_end_matches('"').to_owned());
        } else if section == "[[bench]]"
            && let Some(name) = line.strip_prefix("name = \"")
        {
            needed.push(format!("benches/{}.rs", name.trim_end_matches('"')));
        }
    }
    assert!(
        needed.iter().any(|p| p.starts_with("benches/")),
        "{needed:?}"
    );
    for path in &needed {
        assert!(std::path::Path::new(path).exists(), "{path} exists");
        assert!(
            build_stage
                .iter()
                .any(|copied| path == copied || path.starts_with(&format!("{copied}/"))),
            "the Dockerfile's build stage does not copy {path} (it copies {build_stage:?})"
        );
    }
}

/// The meaningful lines of a YAML document written as docker-compose.yml is (block mappings
/// and sequences, `#` comments, no anchors or multi-line scalars): no blank or comment-only
/// lines, no trailing comments.
fn yaml_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(|line| line.split(" #").next().unwrap_or_default().trim_end())
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .collect()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The `key: value` lines of a block's own level (not the ones nested deeper).
fn entries<'a>(block: &[&'a str]) -> impl Iterator<Item = (&'a str, &'a str)> {
    let level = block.iter().map(|line| indent(line)).min().unwrap_or(0);
    block
        .iter()
        .filter(move |line| indent(line) == level)
        .filter_map(|line| line.trim().split_once(':'))
        .map(|(key, value)| (key.trim(), value.trim()))
}

/// The lines nested under `key:` at a block's own level; `None` without that key.
fn nested<'a>(block: &[&'a str], key: &str) -> Option<Vec<&'a str>> {
    let level = block.iter().map(|line| indent(line)).min()?;
    let start = block
        .iter()
        .position(|line| indent(line) == level && line.trim() == format!("{key}:"))?;
    Some(
        block[start + 1..]
            .iter()
            .take_while(|line| indent(line) > level)
            .copied()
            .collect(),
    )
}

fn unquote(value: &str) -> &str {
    value.trim().trim_matches('"').trim_matches('\'')
}

/// The value of `key: value` at a block's own level, unquoted.
fn scalar<'a>(block: &[&'a str], key: &str) -> Option<&'a str> {
    entries(block)
        .find(|(k, value)| *k == key && !value.is_empty())
        .map(|(_, value)| unquote(value))
}

/// The items of the sequence under `key:`: `- item` lines or a flow sequence `[a, b]`.
fn sequence<'a>(block: &[&'a str], key: &str) -> Vec<&'a str> {
    if let Some(flow) = scalar(block, key) {
        let flow = flow.strip_prefix('[').and_then(|f| f.strip_suffix(']'));
        return flow
            .expect("a flow sequence")
            .split(',')
            .map(unquote)
            .collect();
    }
    nested(block, key)
        .unwrap_or_default()
        .iter()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(unquote)
        .collect()
}

fn compose_service<'a>(lines: &[&'a str], name: &str) -> Vec<&'a str> {
    let services = nested(lines, "services").expect("compose has services");
    nested(&services, name).unwrap_or_else(|| panic!("compose has a {name} service"))
}

/// A compose duration (`40s`, `1m30s`, `2h`) in seconds.
fn compose_seconds(duration: &str) -> u64 {
    let (mut total, mut number) = (0, String::new());
    for c in duration.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => panic!("unexpected unit {c:?} in the compose duration {duration}"),
        };
        total += number.parse::<u64>().expect("a number before each unit") * unit;
        number.clear();
    }
    assert!(number.is_empty(), "{duration} ends with a unit");
    total
}

/// `engine.shutdown_grace_seconds` as the compose stack runs it: the compose environment, else
/// config/docker.toml, else config/default.toml.
fn shutdown_grace_seconds(agentry_service: &[&str]) -> u64 {
    let environment = nested(agentry_service, "environment").unwrap_or_default();
    if let Some(value) = scalar(&environment, "AGENTRY__ENGINE__SHUTDOWN_GRACE_SECONDS") {
        return value.parse().unwrap();
    }
    ["config/docker.toml", "config/default.toml"]
        .iter()
        .find_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .find_map(|line| line.trim().strip_prefix("shutdown_grace_seconds"))
                .and_then(|rest| rest.trim().strip_prefix('='))
                .map(|value| value.trim().parse().unwrap())
        })
        .expect("the configuration sets engine.shutdown_grace_seconds")
}

#[test]
fn the_compose_file_runs_several_replicas_behind_the_proxy() {
    let compose = compose();
    let lines = yaml_lines(&compose);
    let agentry = compose_service(&lines, "agentry");

    let deploy = nested(&agentry, "deploy").expect("agentry has a deploy section");
    let replicas: u32 = scalar(&deploy, "replicas")
        .expect("deploy.replicas")
        .parse()
        .unwrap();
    assert!(replicas >= 2, "agentry runs {replicas} replica(s)");

    // Replicas cannot share a host port: only the proxy publishes one.
    assert!(
        entries(&agentry).all(|(key, _)| key != "ports"),
        "agentry publishes no host port: its replicas cannot share one"
    );
    assert!(entries(&agentry).all(|(key, _)| key != "container_name"));
    // The API's port, and /metrics on a port of its own that the proxy never forwards.
    let docker = std::fs::read_to_string("config/docker.toml").unwrap();
    let settings = agentry::config::Settings::from_toml(&docker).unwrap();
    let api_port = settings.server.bind.rsplit(':').next().unwrap();
    let metrics_port = settings.metrics.bind.rsplit(':').next().unwrap();
    assert_eq!(api_port, "8080");
    assert_ne!(
        metrics_port, api_port,
        "/metrics is not on the proxied port"
    );
    assert!(settings.metrics.enabled && !settings.metrics.on_main_port());
    assert_eq!(sequence(&agentry, "expose"), [api_port, metrics_port]);
    let haproxy = std::fs::read_to_string("deploy/haproxy.cfg").unwrap();
    assert!(
        !haproxy.contains(&format!(":{metrics_port}")),
        "the proxy never forwards the metrics port"
    );

    // A replica set shares one database, which cannot be SQLite.
    let environment = nested(&agentry, "environment").expect("agentry has an environment");
    let url = scalar(&environment, "AGENTRY__DATABASE__URL").expect("a database URL");
    assert!(
        url.starts_with("postgres://") || url.starts_with("postgresql://"),
        "the replicas' database is PostgreSQL: {url}"
    );

    // A stopping replica gets its full shutdown grace before compose kills it.
    let stop = scalar(&agentry, "stop_grace_period").expect("agentry has a stop_grace_period");
    let grace = shutdown_grace_seconds(&agentry);
    assert!(
        compose_seconds(stop) > grace,
        "stop_grace_period {stop} leaves running turns their {grace} s shutdown grace"
    );

    let proxy = compose_service(&lines, "proxy");
    let image = scalar(&proxy, "image").expect("the proxy has an image");
    assert!(
        image.starts_with("haproxy:"),
        "the proxy is HAProxy: {image}"
    );
    let ports = sequence(&proxy, "ports");
    assert!(
        ports.iter().any(|port| {
            let parts: Vec<&str> = port.split(':').collect();
            parts.len() >= 2 && parts[parts.len() - 2] == "8080"
        }),
        "the proxy publishes 8080: {ports:?}"
    );
    let volumes = sequence(&proxy, "volumes");
    assert!(
        volumes
            .iter()
            .any(|volume| volume
                .starts_with("./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg")),
        "the proxy mounts deploy/haproxy.cfg where the image reads it: {volumes:?}"
    );
    assert!(std::path::Path::new("deploy/haproxy.cfg").is_file());
    let depends_on = sequence(&proxy, "depends_on");
    let depends_on_agentry = depends_on.contains(&"agentry")
        || nested(&proxy, "depends_on").is_some_and(|d| entries(&d).any(|(k, _)| k == "agentry"));
    assert!(depends_on_agentry, "the proxy depends on agentry");
}

/// deploy/haproxy.cfg as sections (`global`, `defaults`, `backend agentry`, …), each with its
/// directives, comments removed.
fn haproxy_sections() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string("deploy/haproxy.cfg").expect("deploy/haproxy.cfg exists");
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        let content = line.split('#').next().unwrap_or_default();
        if content.trim().is_empty() {
            continue;
        }
        let words = content.split_whitespace().collect::<Vec<_>>().join(" ");
        if indent(content) == 0 {
            sections.push((words, Vec::new()));
        } else {
            sections
                .last_mut()
                .expect("directives belong to a section")
                .1
                .push(words);
        }
    }
    sections
}

fn haproxy_section<'a>(sections: &'a [(String, Vec<String>)], header: &str) -> &'a [String] {
    sections
        .iter()
        .find(|(h, _)| h == header)
        .map(|(_, directives)| directives.as_slice())
        .unwrap_or_else(|| panic!("deploy/haproxy.cfg has a `{header}` section"))
}

/// An HAProxy time (`5s`, `1h`, `500`: milliseconds without a unit) in seconds.
fn haproxy_seconds(time: &str) -> f64 {
    let split = time
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(time.len());
    let value: f64 = time[..split].parse().expect("a number");
    value
        * match &time[split..] {
            "" | "ms" => 0.001,
            "us" => 0.000_001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            unit => panic!("unknown HAProxy time unit {unit:?}"),
        }
}

/// The value of `timeout <which>` for the `backend agentry`: its own, else the defaults'.
fn backend_timeout(sections: &[(String, Vec<String>)], which: &str) -> f64 {
    let prefix = format!("timeout {which} ");
    ["backend agentry", "defaults"]
        .iter()
        .find_map(|header| {
            haproxy_section(sections, header)
                .iter()
                .find_map(|d| d.strip_prefix(&prefix))
        })
        .map(haproxy_seconds)
        .unwrap_or_else(|| panic!("deploy/haproxy.cfg sets `timeout {which}`"))
}

/// The HAProxy binary: on PATH, or in the sbin directories a user's PATH may lack.
fn haproxy_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("haproxy"))
        .find(|candidate| candidate.is_file())
}

#[test]
fn the_proxy_configuration_is_valid_for_haproxy() {
    let sections = haproxy_sections();
    let has = |header: &str, directive: &str| {
        haproxy_section(&sections, header)
            .iter()
            .any(|d| d == directive)
    };

    // Runs in the foreground of its container.
    assert!(!has("global", "daemon"));
    assert!(has("defaults", "mode http"));
    assert!(has("frontend http", "bind :8080"));

    // Replicas are found through Docker's DNS under the service name `agentry`.
    assert!(has("resolvers docker", "nameserver dns 127.0.0.11:53"));
    let backend = haproxy_section(&sections, "backend agentry");
    let template = backend
        .iter()
        .find_map(|d| d.strip_prefix("server-template "))
        .expect("the backend has a server-template");
    let words: Vec<&str> = template.split_whitespace().collect();
    assert_eq!(words.get(2), Some(&"agentry:8080"), "{template}");
    assert!(words[1].parse::<u32>().unwrap() >= 2, "{template}");
    for option in ["check", "resolvers docker", "init-addr none"] {
        assert!(
            template.contains(option),
            "the server-template has `{option}`"
        );
    }

    // Only ready replicas get requests: a draining one answers /readyz with 503.
    let health_check = backend
        .iter()
        .find_map(|d| d.strip_prefix("option httpchk "))
        .expect("the backend checks the replicas over HTTP");
    assert!(
        health_check
            .split_whitespace()
            .any(|word| word == "/readyz"),
        "the health check asks /readyz: option httpchk {health_check}"
    );
    assert!(backend.iter().any(|d| d == "http-check expect status 200"));
    assert!(backend.iter().any(|d| d == "balance leastconn"));

    // SSE streams: nothing buffers them, and they stay open far beyond agentry's 15 s keep-alive.
    let every: Vec<&String> = sections.iter().flat_map(|(_, d)| d).collect();
    for unwanted in [
        "compression",
        "option http-server-close",
        "option httpclose",
    ] {
        assert!(
            !every.iter().any(|d| d.starts_with(unwanted)),
            "deploy/haproxy.cfg has no `{unwanted}`"
        );
    }
    for which in ["server", "tunnel"] {
        let seconds = backend_timeout(&sections, which);
        assert!(
            seconds >= 3600.0,
            "timeout {which} is {seconds} s: long SSE streams need about an hour"
        );
    }

    // HAProxy accepts the file, without warnings, and without resolving anything.
    let Some(haproxy) = haproxy_binary() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "haproxy is not installed: the CI must install it (apt-get install haproxy) to \
             check deploy/haproxy.cfg"
        );
        println!("skipped: haproxy is not installed, deploy/haproxy.cfg was not checked by it");
        return;
    };
    let output = std::process::Command::new(&haproxy)
        .args(["-c", "-f", "deploy/haproxy.cfg"])
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", haproxy.display()));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "haproxy -c rejects deploy/haproxy.cfg:\n{report}"
    );
    assert!(
        !report.contains("[WARNING]") && !report.contains("[ALERT]"),
        "haproxy -c warns about deploy/haproxy.cfg:\n{report}"
    );
}
