//! The operator's path: tenant → credential → token → session, and taking it all back.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn admin_credential_token_session_lifecycle() {
    let app = spawn_app().await;
    let admin = app.admin_token.clone();

    let created = app
        .post("/admin/tenants", &admin, json!({"name": "acme"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let tenant = created.body["id"].as_str().unwrap().to_owned();
    assert!(tenant.starts_with("ten_"));
    assert_eq!(created.body["name"], "acme");
    assert_eq!(created.body["status"], "active");
    assert!(created.body["created_at"].is_string());

    let fetched = app.get(&format!("/admin/tenants/{tenant}"), &admin).await;
    assert_eq!(fetched.status, StatusCode::OK);
    assert_eq!(fetched.body, created.body);

    let renamed = app
        .patch(
            &format!("/admin/tenants/{tenant}"),
            &admin,
            json!({"name": "acme corp"}),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.text);
    assert_eq!(renamed.body["name"], "acme corp");
    assert_eq!(renamed.body["status"], "active");

    let duplicate = app
        .post("/admin/tenants", &admin, json!({"name": "acme corp"}))
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(duplicate.code(), "conflict");

    // A credential: its secret is shown once and never listed.
    let credential = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &admin,
            json!({"name": "ci"}),
        )
        .await;
    assert_eq!(
        credential.status,
        StatusCode::CREATED,
        "{}",
        credential.text
    );
    let client_id = credential.body["client_id"].as_str().unwrap().to_owned();
    let client_secret = credential.body["client_secret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(client_id.starts_with("cred_"));
    assert!(client_secret.len() >= 32);
    let listed = app
        .get(&format!("/admin/tenants/{tenant}/credentials"), &admin)
        .await;
    assert_eq!(
        listed.body["credentials"][0]["client_id"],
        client_id.as_str()
    );
    assert_eq!(listed.body["credentials"][0]["name"], "ci");
    assert!(!listed.text.contains(&client_secret));
    assert!(!listed.text.contains("argon2"));

    // Login with JSON and with a form body.
    let login = app
        .request(
            reqwest::Method::POST,
            "/auth/token",
            None,
            Some(&json!({"client_id": client_id, "client_secret": client_secret})),
        )
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.text);
    assert_eq!(login.body["token_type"], "Bearer");
    assert_eq!(login.body["expires_in"], 3600);
    let access = login.body["access_token"].as_str().unwrap().to_owned();
    let form = app
        .client
        .post(app.url("/auth/token"))
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", client_id.as_str()),
            ("client_secret", client_secret.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let form: Value = form.json().await.unwrap();
    assert!(form["access_token"].is_string());

    // The access token works on the AAP face.
    let session = app
        .create_session(&access, json!({"agent": {"name": "echo"}}))
        .await;
    let read = app.get(&format!("/sessions/{session}"), &access).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body["sessionId"], session.as_str());

    // An API key minted by the admin works too, until revoked.
    let key = app
        .post(
            &format!("/admin/tenants/{tenant}/tokens"),
            &admin,
            json!({"ttl_seconds": 600, "name": "laptop"}),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.text);
    let api_key = key.body["token"].as_str().unwrap().to_owned();
    let jti = key.body["jti"].as_str().unwrap().to_owned();
    assert!(key.body["expires_at"].is_string());
    assert_eq!(app.get("/sessions", &api_key).await.status, StatusCode::OK);
    let tokens = app
        .get(&format!("/admin/tenants/{tenant}/tokens"), &admin)
        .await;
    assert_eq!(tokens.body["tokens"][0]["jti"], jti.as_str());
    assert!(!tokens.text.contains(&api_key));
    let revoked = app
        .delete(&format!("/admin/tenants/{tenant}/tokens/{jti}"), &admin)
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT);
    let refused = app.get("/sessions", &api_key).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.code(), "invalid_token");
    assert_eq!(app.get("/sessions", &access).await.status, StatusCode::OK);

    // Deleting the credential ends its tokens and its logins.
    let deleted = app
        .delete(
            &format!("/admin/tenants/{tenant}/credentials/{client_id}"),
            &admin,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/sessions", &access).await.status,
        StatusCode::UNAUTHORIZED
    );
    let login_again = app
        .request(
            reqwest::Method::POST,
            "/auth/token",
            None,
            Some(&json!({"client_id": client_id, "client_secret": client_secret})),
        )
        .await;
    assert_eq!(login_again.status, StatusCode::UNAUTHORIZED);

    // Deleting the tenant deletes everything it owned.
    let other_key = app.token_for(&tenant).await;
    let gone = app
        .delete(&format!("/admin/tenants/{tenant}"), &admin)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&format!("/admin/tenants/{tenant}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/sessions", &other_key).await.status,
        StatusCode::UNAUTHORIZED
    );
    let tenant_id = tenant.parse().unwrap();
    let session_id = session.parse().unwrap();
    assert!(matches!(
        app.state.store().get_session(&tenant_id, &session_id).await,
        Err(agentry::store::StoreError::NotFound)
    ));
    assert!(
        app.state
            .store()
            .list_api_tokens(&tenant_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        app.delete(&format!("/admin/tenants/{tenant}"), &admin)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn wrong_credentials_get_one_answer_whatever_was_wrong() {
    let app = spawn_app().await;
    let tenant = app.create_tenant("wrong-creds").await;
    let credential = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let client_id = credential.body["client_id"].as_str().unwrap();
    let attempts = [
        json!({"client_id": client_id, "client_secret": "wrong"}),
        json!({"client_id": "cred_0123456789abcdef0123456789abcdef", "client_secret": "wrong"}),
        json!({"client_id": "nonsense", "client_secret": "wrong"}),
        json!({"client_id": "admin", "client_secret": "wrong"}),
    ];
    let mut messages = Vec::new();
    for attempt in attempts {
        let reply = app
            .request(reqwest::Method::POST, "/auth/token", None, Some(&attempt))
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{attempt}");
        assert_eq!(reply.code(), "invalid_credentials");
        messages.push(reply.body["error"]["message"].clone());
    }
    messages.dedup();
    assert_eq!(messages.len(), 1, "the answers differ: {messages:?}");
}

#[tokio::test]
async fn tenants_page_newest_first() {
    let app = spawn_app().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(app.create_tenant(&format!("paged-{i}")).await);
    }
    let first = app.get("/admin/tenants?limit=3", &app.admin_token).await;
    let next = first.body["next"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    let second = app
        .get(
            &format!("/admin/tenants?limit=3&after={next}"),
            &app.admin_token,
        )
        .await;
    assert!(second.body.get("next").is_none());
    let ids: Vec<&str> = first.body["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second.body["tenants"].as_array().unwrap())
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    created.reverse();
    assert_eq!(ids, created);
}
