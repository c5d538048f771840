//! Bad schedules are refused naming their field; another tenant's schedule is not found.

use serde_json::{Value, json};

use super::{create, every, fast_app};
use crate::helpers::{TestDb, spawn_app, spawn_app_on};

async fn refused(app: &crate::helpers::TestApp, token: &str, body: Value, field: &str) {
    let reply = app.post("/schedules", token, body.clone()).await;
    assert_eq!(reply.status, 400, "{body}: {}", reply.text);
    assert_eq!(reply.code(), "invalid_request");
    assert_eq!(
        reply.body["error"]["field"], field,
        "{body}: {}",
        reply.text
    );
}

#[tokio::test]
async fn bad_schedules_are_refused_naming_the_field() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let base = json!({"agent": {"name": "echo"}, "cron": "0 9 * * 1-5", "input": "hi"});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    refused(&app, &token, with("cron", json!("61 * * * *")), "cron").await;
    refused(&app, &token, with("cron", json!("* * *")), "cron").await;
    refused(&app, &token, with("cron", json!("@daily")), "cron").await;
    // Every ten seconds is more often than the default minimum of a minute.
    refused(&app, &token, with("cron", json!("*/10 * * * * *")), "cron").await;
    refused(
        &app,
        &token,
        with("time_zone", json!("Mars/Olympus")),
        "time_zone",
    )
    .await;
    refused(
        &app,
        &token,
        with("agent", json!({"name": "nobody"})),
        "agent.name",
    )
    .await;
    refused(
        &app,
        &token,
        with("agent", json!({"name": "echo", "version": 3})),
        "agent.version",
    )
    .await;
    refused(
        &app,
        &token,
        with(
            "agent",
            json!({"name": "echo", "options": {"style": "loud"}}),
        ),
        "agent.options.style",
    )
    .await;
    // A schedule stores no secret.
    refused(
        &app,
        &token,
        with(
            "agent",
            json!({"name": "echo", "options": {"api_key": "sk-1"}}),
        ),
        "agent.options.api_key",
    )
    .await;
    refused(&app, &token, with("overlap", json!("sometimes")), "overlap").await;
    refused(
        &app,
        &token,
        with("session_policy", json!("shared")),
        "session_policy",
    )
    .await;
    refused(&app, &token, with("catch_up", json!("all")), "catch_up").await;
    let mut up_to = with("catch_up", json!("up_to"));
    up_to["catch_up_limit"] = json!(1000);
    refused(&app, &token, up_to, "catch_up_limit").await;
    let mut window = with("starts_at", json!("2030-01-02T00:00:00Z"));
    window["ends_at"] = json!("2030-01-01T00:00:00Z");
    refused(&app, &token, window, "ends_at").await;
    refused(&app, &token, with("colour", json!("red")), "colour").await;
    refused(&app, &token, with("input", json!(42)), "input").await;

    // A good one, read back as sent, with its next occurrence in its zone.
    let mut good = with("time_zone", json!("Asia/Tokyo"));
    good["cron"] = json!("0 9 * * 1-5");
    let created = create(&app, &token, good).await;
    assert_eq!(created["time_zone"], "Asia/Tokyo");
    assert_eq!(created["session_policy"], "new");
    assert_eq!(created["overlap"], "skip");
    assert_eq!(created["catch_up"], "latest");
    let next: chrono::DateTime<chrono::FixedOffset> =
        created["next_at"].as_str().unwrap().parse().unwrap();
    use chrono::Timelike;
    assert_eq!(next.with_timezone(&chrono_tz::Asia::Tokyo).hour(), 9);
    let id = created["id"].as_str().unwrap();
    let bad_patch = app
        .patch(&format!("/schedules/{id}"), &token, json!({"cron": "nope"}))
        .await;
    assert_eq!(bad_patch.status, 400);
    assert_eq!(bad_patch.body["error"]["field"], "cron");
}

#[tokio::test]
async fn a_tenant_may_have_only_so_many_schedules() {
    let app = spawn_app_on(
        std::sync::Arc::new(TestDb::new().await),
        "[schedules]\nmax_per_tenant = 2\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"agent": {"name": "echo"}, "cron": "0 9 * * *", "input": "hi"});
    create(&app, &token, body.clone()).await;
    create(&app, &token, body.clone()).await;
    let third = app.post("/schedules", &token, body.clone()).await;
    assert_eq!(third.status, 409, "{}", third.text);
    assert!(third.text.contains("at most 2 schedules"), "{}", third.text);
    // Another tenant has its own allowance.
    let (_, other) = app.new_tenant().await;
    create(&app, &other, body).await;
}

#[tokio::test]
async fn another_tenants_schedule_is_not_found_on_every_route() {
    let app = fast_app().await;
    let (_, owner) = app.new_tenant().await;
    let (other_tenant, other) = app.new_tenant().await;
    let schedule = create(&app, &owner, every(2, json!({"enabled": false}))).await;
    let id = schedule["id"].as_str().unwrap();
    let path = format!("/schedules/{id}");

    let checks = [
        app.get(&path, &other).await,
        app.patch(&path, &other, json!({"enabled": true})).await,
        app.post(&format!("{path}/run"), &other, json!({})).await,
        app.get(&format!("{path}/runs"), &other).await,
        app.delete(&path, &other).await,
        // The admin routes of the wrong tenant.
        app.get(
            &format!("/admin/tenants/{other_tenant}/schedules/{id}"),
            &app.admin_token,
        )
        .await,
        app.post(
            &format!("/admin/tenants/{other_tenant}/schedules/{id}/run"),
            &app.admin_token,
            json!({}),
        )
        .await,
        app.get(
            &format!("/admin/tenants/{other_tenant}/schedules/{id}/runs"),
            &app.admin_token,
        )
        .await,
        app.delete(
            &format!("/admin/tenants/{other_tenant}/schedules/{id}"),
            &app.admin_token,
        )
        .await,
    ];
    for reply in checks {
        assert_eq!(reply.status, 404, "{}", reply.text);
        assert_eq!(reply.code(), "not_found");
        assert_eq!(reply.body["error"]["message"], "schedule not found");
    }
    let listed = app.get("/schedules", &other).await;
    assert_eq!(listed.body["schedules"], json!([]));
    // Untouched, and still the owner's.
    let mine = app.get(&path, &owner).await;
    assert_eq!(mine.status, 200);
    assert_eq!(mine.body["enabled"], false);
    let runs = app.get(&format!("{path}/runs"), &owner).await;
    assert_eq!(runs.body["runs"], json!([]));
}

#[tokio::test]
async fn operators_list_schedules_and_their_runs_from_the_command_line() {
    let app = fast_app().await;
    let (tenant, token) = app.new_tenant().await;
    let schedule = create(&app, &token, every(2, json!({"enabled": false}))).await;
    let id = schedule["id"].as_str().unwrap();
    let run = app
        .post(&format!("/schedules/{id}/run"), &token, json!({}))
        .await;
    assert_eq!(run.status, 202, "{}", run.text);
    let id = id.to_owned();
    let db = app.stop().await;

    let listed = crate::process::run_ok(crate::process::agentry(db.url()).args([
        "schedules",
        "list",
        &tenant,
    ]));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["cron"], "*/2 * * * * *");
    let runs = crate::process::run_ok(crate::process::agentry(db.url()).args([
        "schedules",
        "runs",
        &tenant,
        &id,
    ]));
    let runs: Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(runs[0]["id"], run.body["id"]);
    assert_eq!(runs[0]["kind"], "manual");

    let unknown = crate::process::agentry(db.url())
        .args(["schedules", "runs", &tenant, "sched_nope"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not a schedule id"));
}
