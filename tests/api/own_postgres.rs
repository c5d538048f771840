//! A PostgreSQL cluster of a test's own, on a free port, that the test stops and starts
//! (`initdb` / `pg_ctl` as the `postgres` user): for database outages. The shared server
//! that `TEST_POSTGRES_URL` names is never stopped.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct OwnPostgres {
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

/// Where the PostgreSQL binaries are: `initdb` on the `PATH`'s usual places, else the
/// newest under /usr/lib/postgresql.
fn bin(name: &str) -> PathBuf {
    let local = Path::new("/usr/local/bin").join(name);
    if local.exists() {
        return local;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .map(|v| v.join("bin").join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn as_postgres(program: PathBuf) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(program);
    command
}

fn chown_postgres(path: &Path) {
    let status = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

impl OwnPostgres {
    /// `None` where a cluster cannot be made (no PostgreSQL binaries, or not root).
    pub fn start() -> Option<OwnPostgres> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_postgres(dir.path());
        let data = dir.path().join("data");
        let made = as_postgres(bin("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .output();
        match made {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                eprintln!(
                    "cannot make a PostgreSQL cluster: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                return None;
            }
            Err(error) => {
                eprintln!("cannot make a PostgreSQL cluster: {error}");
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cluster = OwnPostgres {
            dir,
            port,
            running: false,
        };
        cluster.up();
        Some(cluster)
    }

    /// A URL of a database of its own on this cluster, created now.
    pub async fn database(&self, name: &str) -> String {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .unwrap();
        self.url(name)
    }

    /// A fresh database on this cluster, as the tests' other helpers take it.
    pub async fn test_db(&self) -> crate::helpers::TestDb {
        let name = format!("agentry_test_{}", uuid::Uuid::new_v4().simple());
        let url = self.database(&name).await;
        crate::helpers::TestDb::Postgres {
            server_url: self.url("postgres"),
            name,
            url,
        }
    }

    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    fn pg_ctl(&self, args: &[&str]) {
        let output = as_postgres(bin("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "pg_ctl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the cluster (again) and waits until it takes connections.
    pub fn up(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log");
        self.pg_ctl(&["-w", "-o", &options, "-l", log.to_str().unwrap(), "start"]);
        self.running = true;
    }

    /// Stops the cluster at once: every connection is cut.
    pub fn down(&mut self) {
        self.pg_ctl(&["-w", "-m", "immediate", "stop"]);
        self.running = false;
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = as_postgres(bin("pg_ctl"))
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "immediate", "stop"])
                .output();
        }
    }
}
