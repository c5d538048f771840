//! Who is calling: JWTs, login limits, and the tenant, credential and token operations
//! shared by the admin API and the CLI. Its operations return [`AuthError`]; the HTTP
//! layer's extractors (`http::TenantAuth`, `http::AdminAuth`) and error mapping sit above.

mod admin;
mod cache;
mod error;
mod hasher;
mod jwt;
mod limits;
mod tenancy;

pub use crate::store::AuthState;
pub use admin::Admin;
pub use cache::AuthCache;
pub use error::AuthError;
pub use jwt::{ADMIN_SUBJECT, Claims, InvalidToken, Principal, Role, SignedToken, TokenKeys};
pub use limits::LoginLimits;
pub use tenancy::{
    IssuedApiToken, LoginContext, NewCredential, create_credential, create_tenant, issue_api_token,
    login, validate_tenant_name,
};
