//! docker-compose.yml and the Dockerfile cannot run here; what they run can be checked: the
//! configuration they point at, and every setting they pass, are valid for this binary.

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
