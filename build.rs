//! Rebuilds when a migration changes, so new migration files are embedded.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
