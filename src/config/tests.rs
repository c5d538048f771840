//! Loading, layering and validation of whole configurations.

use super::*;

#[test]
fn embedded_defaults_are_valid() {
    let settings = Settings::from_toml("").expect("defaults load");
    assert_eq!(settings.server.bind, "127.0.0.1:8080");
    assert!(settings.database.url.expose().starts_with("sqlite:"));
    assert_eq!(settings.agents[0].name, "echo");
}

#[test]
fn unknown_keys_are_named() {
    let err = Settings::from_toml("[server]\nbindd = \"x\"").unwrap_err();
    assert_eq!(err.key, "server.bindd");
    assert!(err.message.contains("bindd"), "{}", err.message);
}

#[test]
fn invalid_values_name_their_key() {
    let err = Settings::from_toml("[server]\nbind = \"nowhere\"").unwrap_err();
    assert_eq!(err.key, "server.bind");
    let err = Settings::from_toml("[auth]\ntoken_ttl_seconds = \"soon\"").unwrap_err();
    assert_eq!(err.key, "auth.token_ttl_seconds");
    let err = Settings::from_toml(
        "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n[[agents.options]]\nname = \"m\"\ntype = \"select\"\noptions = [\"x\"]\ndefault = \"y\"",
    )
    .unwrap_err();
    assert_eq!(err.key, "agents[0].options[0].default");
    let err = Settings::from_toml("[engine]\nlease_ms = 100").unwrap_err();
    assert_eq!(err.key, "engine.lease_ms");
    let err = Settings::from_toml("[engine]\nlease_sweep_ms = 0").unwrap_err();
    assert_eq!(err.key, "engine.lease_sweep_ms");
    let err = Settings::from_toml("[server]\ncors_allowed_origins = [\"https://a.example/app\"]")
        .unwrap_err();
    assert_eq!(err.key, "server.cors_allowed_origins[0]");
    let err = Settings::from_toml("[database]\nsqlite_readers = 0").unwrap_err();
    assert_eq!(err.key, "database.sqlite_readers");
    let err = Settings::from_toml("[database]\nsqlite_writer_cache_kib = 16").unwrap_err();
    assert_eq!(err.key, "database.sqlite_writer_cache_kib");
}

#[test]
fn provider_placeholders_are_checked_at_load() {
    let agent = "[[agents]]\nname = \"a\"\nprovider = \"openai\"\nbase_url = \"http://x/v1\"\n";
    let err =
        Settings::from_toml(&format!("{agent}model = \"{{{{options.model}}}}\"\n")).unwrap_err();
    assert_eq!(err.key, "agents[0].model");
    assert!(err.message.contains("options.model"), "{}", err.message);

    let err = Settings::from_toml(agent).unwrap_err();
    assert_eq!(err.key, "agents[0].model");

    let err = Settings::from_toml(&format!(
        "{agent}model = \"m\"\napi_key = \"${{AGENTRY_TEST_NEVER_SET}}\"\n"
    ))
    .unwrap_err();
    assert_eq!(err.key, "agents[0].api_key");
    assert!(err.message.contains("AGENTRY_TEST_NEVER_SET"));
    let mut ok = Settings::from_toml("").unwrap();
    ok.agents[0].system_prompt = "Hello ${WHO}".into();
    ok.resolve_environment(|name| (name == "WHO").then(|| "world".to_owned()))
        .unwrap();
    assert_eq!(ok.agents[0].system_prompt, "Hello world");
}

#[test]
fn mcp_server_errors_name_their_key() {
    let agent = "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n";
    let err = |toml: &str| Settings::from_toml(&format!("{toml}\n{agent}")).unwrap_err();
    let e = err("[[mcp_servers]]\nname = \"fs\"");
    assert_eq!(e.key, "mcp_servers[0].command");
    let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\nurl = \"http://h/mcp\"");
    assert_eq!(e.key, "mcp_servers[0].url");
    let e = err("[[mcp_servers]]\nname = \"Files.1\"\ncommand = \"x\"");
    assert_eq!(e.key, "mcp_servers[0].name");
    let e = err("[[mcp_servers]]\nname = \"fs\"\nurl = \"ftp://h\"");
    assert_eq!(e.key, "mcp_servers[0].url");
    let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\ntimeout_seconds = 0");
    assert_eq!(e.key, "mcp_servers[0].timeout_seconds");
    let e = err(
        "[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"fs\"\ncommand = \"y\"",
    );
    assert_eq!(e.key, "mcp_servers[1].name");
    let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\nbogus = 1");
    assert_eq!(e.key, "mcp_servers.0.bogus");
    let e = err("[[mcp_servers]]\nname = \"fs\"\ncommand = \"${AGENTRY_TEST_NEVER_SET}\"");
    assert_eq!(e.key, "mcp_servers[0].command");

    let server = "[[mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\n";
    let tool = |name: &str, extra: &str| {
        Settings::from_toml(&format!(
            "{server}{agent}[[agents.tools]]\nname = \"{name}\"\n{extra}"
        ))
    };
    assert_eq!(
        tool("web.search", "").unwrap_err().key,
        "agents[0].tools[0].name"
    );
    assert!(tool("web.search", "").unwrap_err().message.contains("web"));
    assert_eq!(
        tool("fs.read", "parameters = { type = \"object\" }")
            .unwrap_err()
            .key,
        "agents[0].tools[0].parameters"
    );
    assert_eq!(
        tool("fs.*", "description = \"x\"").unwrap_err().key,
        "agents[0].tools[0].description"
    );
    assert!(tool("fs.read", "expose = false").is_ok());
    assert!(tool("fs.*", "").is_ok());
}

#[test]
fn mcp_servers_read_the_environment() {
    let mut settings = Settings::from_toml(
        "[[mcp_servers]]\nname = \"gh\"\nurl = \"https://h/mcp\"\nheaders = { Authorization = \"Bearer x\" }",
    )
    .unwrap();
    settings.mcp_servers[0]
        .headers
        .insert("Authorization".into(), Secret::new("Bearer ${GH_TOKEN}"));
    settings
        .resolve_environment(|name| (name == "GH_TOKEN").then(|| "t0k".to_owned()))
        .unwrap();
    assert_eq!(
        settings.mcp_servers[0].headers["Authorization"].expose(),
        "Bearer t0k"
    );
    assert!(
        !format!("{settings:?}").contains("t0k"),
        "headers are secrets"
    );
}

#[test]
fn secrets_never_print() {
    let secret = Secret::new("hunter2-hunter2");
    assert_eq!(format!("{secret:?}"), "\"***\"");
    let settings = Settings::from_toml("[auth]\nadmin_secret = \"hunter2-hunter2\"").unwrap();
    assert!(!format!("{settings:?}").contains("hunter2"));
}

#[test]
fn misspelt_agent_keys_are_named() {
    let agent = |provider: &str, extra: &str| {
        Settings::from_toml(&format!(
            "[[agents]]\nname = \"a\"\nprovider = \"{provider}\"\nmodel = \"m\"\n\
             base_url = \"http://x/v1\"\n{extra}"
        ))
    };
    let err = agent("openai", "base_ur = \"http://x/v1\"").unwrap_err();
    assert_eq!(err.key, "agents.0.base_ur");
    assert!(err.message.contains("`base_ur`"), "{}", err.message);
    let err = agent("anthropic", "sytem_prompt = \"x\"").unwrap_err();
    assert_eq!(err.key, "agents.0.sytem_prompt");
    let err = agent("openia", "").unwrap_err();
    assert_eq!(err.key, "agents.0.provider");
    assert!(err.message.contains("openia"), "{}", err.message);
    assert!(agent("openai", "max_retries = 0\ntimeout_seconds = 5").is_ok());
}

#[test]
fn an_agent_takes_only_its_own_providers_keys() {
    let echo = "[[agents]]\nname = \"a\"\nprovider = \"echo\"\n";
    let err = Settings::from_toml(&format!("{echo}base_url = \"http://x/v1\"")).unwrap_err();
    assert_eq!(err.key, "agents.0.base_url");
    let err = Settings::from_toml(&format!("{echo}chunk_size = 0")).unwrap_err();
    assert_eq!(err.key, "agents[0].chunk_size");
    // A provider's key of the wrong type is named, though serde reports it at the agent.
    let err = Settings::from_toml(&format!("{echo}chunk_size = \"big\"")).unwrap_err();
    assert_eq!(err.key, "agents.0.chunk_size", "{}", err.message);
    let err = Settings::from_toml(&format!("{echo}delay_ms = -3\nthinking = true")).unwrap_err();
    assert_eq!(err.key, "agents.0.delay_ms", "{}", err.message);
    let settings = Settings::from_toml(&format!("{echo}chunk_size = 3\nthinking = true")).unwrap();
    let ProviderSettings::Echo(echo) = &settings.agents[0].provider else {
        panic!("an echo agent");
    };
    assert_eq!(
        (echo.chunk_size, echo.delay_ms, echo.thinking),
        (3, 0, true)
    );

    let openai = "[[agents]]\nname = \"a\"\nprovider = \"openai\"\nmodel = \"m\"\n";
    let err =
        Settings::from_toml(&format!("{openai}base_url = \"x\"\nchunk_size = 1")).unwrap_err();
    assert_eq!(err.key, "agents.0.chunk_size");
    let settings = Settings::from_toml(&format!("{openai}base_url = \"http://x/v1\"")).unwrap();
    let api = settings.agents[0]
        .provider
        .http()
        .expect("an HTTP provider");
    assert_eq!((api.timeout_seconds, api.max_retries), (120, 2));
    assert_eq!(settings.agents[0].provider.kind(), ProviderKind::Openai);
}

#[test]
fn metrics_settings_are_checked_and_their_token_never_prints() {
    let settings = Settings::from_toml("").unwrap();
    assert!(settings.metrics.enabled && settings.metrics.on_main_port());
    assert!(!settings.metrics.tenant_label);
    let err = Settings::from_toml("[metrics]\nbind = \"nowhere\"").unwrap_err();
    assert_eq!(err.key, "metrics.bind");
    let err = Settings::from_toml("[metrics]\nbind = \"127.0.0.1:8080\"").unwrap_err();
    assert_eq!(err.key, "metrics.bind");
    let err = Settings::from_toml("[metrics]\nbearer_token = \"two words\"").unwrap_err();
    assert_eq!(err.key, "metrics.bearer_token");
    let own = Settings::from_toml(
        "[metrics]\nbind = \"127.0.0.1:9100\"\nbearer_token = \"scrape-secret\"",
    )
    .unwrap();
    assert!(!own.metrics.on_main_port());
    assert_eq!(own.metrics.own_bind(), Some("127.0.0.1:9100"));
    let printed = format!("{own:?}");
    assert!(!printed.contains("scrape-secret"), "{printed}");
    let off = Settings::from_toml("[metrics]\nenabled = false\nbind = \"127.0.0.1:9100\"").unwrap();
    assert!(!off.metrics.on_main_port() && off.metrics.own_bind().is_none());
}
