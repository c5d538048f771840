//! Who is calling: JWTs, the extractors that state who may call a handler, and the
//! tenant, credential and token operations shared by the admin API and the CLI.

mod extract;
mod jwt;
mod limits;
mod tenancy;

pub use extract::{AdminAuth, TenantAuth, authenticate};
pub use jwt::{ADMIN_SUBJECT, Claims, InvalidToken, Principal, Role, SignedToken, TokenKeys};
pub use limits::LoginLimits;
pub use tenancy::{
    IssuedApiToken, NewCredential, create_credential, create_tenant, issue_api_token, login,
    validate_tenant_name,
};
