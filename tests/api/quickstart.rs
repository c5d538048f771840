//! The README's quickstart, as written: its shell blocks run against the real binary, and
//! every output it shows is what they print.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use crate::helpers::TestDb;
use crate::process::{BINARY, ServerProcess, agentry};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text};

/// The address the README's commands use.
const README_ADDRESS: &str = "http://127.0.0.1:8080";

/// The ```sh blocks of the README's Quickstart section, in order.
fn quickstart_blocks() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md is readable");
    let section = readme
        .split("\n## Quickstart\n")
        .nth(1)
        .expect("README has a Quickstart section")
        .split("\n## ")
        .next()
        .unwrap();
    section
        .split("```sh\n")
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap().to_owned())
        .collect()
}

/// One command of a block and the output the README shows under it (its `# ` lines).
#[derive(Debug)]
struct Step {
    command: String,
    shown: Vec<String>,
}

/// A block's commands: paragraphs (separated by blank lines), each a command followed by
/// the lines of output it shows.
fn steps(block: &str) -> Vec<Step> {
    block
        .split("\n\n")
        .map(|paragraph| {
            let (shown, command): (Vec<&str>, Vec<&str>) =
                paragraph.lines().partition(|line| line.starts_with('#'));
            Step {
                command: command.join("\n"),
                shown: shown
                    .iter()
                    .map(|line| {
                        line.strip_prefix("# ")
                            .unwrap_or(line.trim_start_matches('#'))
                    })
                    .map(str::to_owned)
                    .collect(),
            }
        })
        .collect()
}

/// A `cargo run -- serve` command: its environment and the arguments after `serve`.
fn serve_command(step: &Step) -> (Vec<(String, String)>, Vec<String>) {
    let joined = step.command.replace("\\\n", " ");
    let (before, after) = joined
        .split_once("cargo run -- serve")
        .unwrap_or_else(|| panic!("not a serve command: {joined}"));
    let env = before
        .split_whitespace()
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect("NAME=VALUE before cargo");
            (name.to_owned(), value.to_owned())
        })
        .collect();
    (env, after.split_whitespace().map(str::to_owned).collect())
}

/// Starts `agentry serve` as the README's command does.
fn serve(db: &TestDb, step: &Step, overrides: &[(&str, &str)]) -> ServerProcess {
    let (env, args) = serve_command(step);
    let mut command = agentry(db.url());
    command.envs(env).envs(overrides.iter().copied());
    // Global options go before the subcommand `ServerProcess` adds.
    command.args(args);
    ServerProcess::start(command)
}

/// Runs the steps in one shell, `cargo run -q --` standing for the binary and the server's
/// address for the README's; returns each step's output. The variables the steps set are
/// read from `state` first and written back to it at the end.
async fn run_steps(
    steps: &[Step],
    address: &str,
    db: &TestDb,
    state: &std::path::Path,
) -> Vec<String> {
    const MARK: &str = "@@ step output @@";
    let mut script = String::from(
        "set -euo pipefail\n\
         cargo() { [ \"$1\" = run ] || exit 97; shift; [ \"$1\" = -q ] && shift; \
         [ \"$1\" = -- ] || exit 98; shift; \"$AGENTRY_BIN\" \"$@\"; }\n\
         [ -f \"$STATE\" ] && . \"$STATE\"\n",
    );
    for step in steps {
        script.push_str(&format!("printf '\\n{MARK}\\n'\n{}\n", step.command));
    }
    script.push_str(
        "declare -p | grep -E '^declare -- (TENANT|TOKEN|SESSION|TURN|ADMIN)=' > \"$STATE\"\n",
    );
    let script = script.replace(README_ADDRESS, address);
    let mut bash = Command::new("bash");
    bash.arg("-c")
        .arg(&script)
        .env("AGENTRY_BIN", BINARY)
        .env("STATE", state)
        .env_remove("AGENTRY_CONFIG")
        .env("AGENTRY__DATABASE__URL", db.url());
    // Off the test's runtime, which serves the scripted model the commands reach.
    let output = tokio::task::spawn_blocking(move || bash.output().expect("bash runs"))
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "the quickstart failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .split(&format!("\n{MARK}\n"))
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// Whether `text` fits `pattern`, where each `…` stands for any text.
fn fits(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether the output's lines fit the shown lines, where a line `…` stands for any lines.
fn fits_lines(shown: &[String], output: &[&str]) -> bool {
    match shown.split_first() {
        None => output.is_empty(),
        Some((first, rest)) if first == "…" => {
            (0..=output.len()).any(|skip| fits_lines(rest, &output[skip..]))
        }
        Some((first, rest)) => {
            output.first().is_some_and(|line| fits(first, line)) && fits_lines(rest, &output[1..])
        }
    }
}

fn check_outputs(steps: &[Step], outputs: &[String]) {
    assert_eq!(steps.len(), outputs.len(), "{outputs:?}");
    for (step, output) in steps.iter().zip(outputs) {
        if step.shown.is_empty() {
            continue;
        }
        let lines: Vec<&str> = output.trim_end_matches('\n').lines().collect();
        let shown: Vec<String> = step
            .shown
            .iter()
            .rev()
            .skip_while(|line| line.is_empty())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .cloned()
            .collect();
        assert!(
            fits_lines(&shown, &lines),
            "README shows\n{}\nunder\n{}\nbut it printed\n{output}",
            shown.join("\n"),
            step.command
        );
    }
}

#[tokio::test]
async fn the_readme_quickstart_works_verbatim() {
    let blocks = quickstart_blocks();
    assert_eq!(blocks.len(), 7, "the quickstart's blocks: {blocks:#?}");
    let db = TestDb::new().await;
    let state = tempfile::tempdir().unwrap();
    let state = state.path().join("state.sh");

    // The first terminal: the server, with the admin secret.
    let first = steps(&blocks[0]);
    let server = serve(&db, &first[0], &[]);

    // The second terminal: the tenant, a session, a streamed turn, its resume, the admin.
    let client: Vec<Step> = blocks[1..5].iter().flat_map(|b| steps(b)).collect();
    let outputs = run_steps(&client, &server.address, &db, &state).await;
    check_outputs(&client, &outputs);
    let logs = server.logs.lock().unwrap().join("\n");
    assert!(
        !logs.contains("sk-my-own-key"),
        "a secret option is never logged"
    );
    server.terminate();
    server.wait_exit(Duration::from_secs(30));

    // A real model: the server again with config/openai.toml, the model a scripted one.
    let model = ScriptedOpenAi::start().await;
    model.push(Reply::Stream(vec![text("Bonjour !"), finish("stop")]));
    let restart = steps(&blocks[5]);
    let (env, _) = serve_command(&restart[0]);
    let names: HashMap<_, _> = env.into_iter().collect();
    for name in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"] {
        assert!(names.contains_key(name), "{name} is set: {names:?}");
    }
    let server = serve(&db, &restart[0], &[("OPENAI_BASE_URL", &model.url)]);
    let chat = steps(&blocks[6]);
    let outputs = run_steps(&chat, &server.address, &db, &state).await;
    check_outputs(&chat, &outputs);
    assert!(
        outputs[1].contains("data: {\"delta\":\"Bonjour !\"}"),
        "{}",
        outputs[1]
    );
    let asked = &model.requests()[0];
    assert_eq!(asked.body["model"], "gpt-4o-mini");
    assert_eq!(asked.authorization.as_deref(), Some("Bearer sk-your-key"));
}

#[test]
fn the_output_matcher_takes_ellipses_for_what_differs() {
    assert!(fits(
        "{\"id\":\"sess_…\",\"at\":\"…\"}",
        "{\"id\":\"sess_1\",\"at\":\"now\"}"
    ));
    assert!(!fits("{\"id\":\"sess_…\"}", "{\"id\":\"turn_1\"}"));
    assert!(!fits("a…b", "a1b2"));
    let shown = ["x".to_owned(), "…".to_owned(), "z".to_owned()];
    assert!(fits_lines(&shown, &["x", "1", "2", "z"]));
    assert!(fits_lines(&shown, &["x", "z"]));
    assert!(!fits_lines(&shown, &["x", "1"]));
}

#[test]
fn config_check_names_the_offending_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[server]\nbind = \"not an address\"\n").unwrap();
    let output = agentry("sqlite://unused.db")
        .args(["config", "check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("server.bind"), "{stderr}");

    std::fs::write(&file, "[database]\nurl = \"mysql://x\"\n").unwrap();
    let output = agentry("sqlite://unused.db")
        .env_remove("AGENTRY__DATABASE__URL")
        .args(["config", "check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("database.url"));

    let output = agentry("sqlite://unused.db")
        .env("AGENTRY__SERVER__WORKERZ", "4")
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("server.workerz"));

    let good = agentry("sqlite://unused.db")
        .args(["config", "check", "--config", "config/docker.toml"])
        .env("AGENTRY__DATABASE__URL", "postgres://agentry@db/agentry")
        .output()
        .unwrap();
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
}
