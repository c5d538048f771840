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
