//! What a stdio server's program leaves behind: its process group. The program leads a
//! group of its own, so whatever it started (a `node` under `npx`, a shell's children)
//! is in it too, and is stopped with it even when the program itself has already exited.

use std::time::Duration;

/// Asks every process left in the group to stop (SIGTERM), and kills those still there
/// after `grace` (SIGKILL). Nothing happens when the group is empty.
#[cfg(unix)]
pub(super) async fn stop(leader: u32, grace: Duration) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;

    let Ok(id) = i32::try_from(leader) else {
        return;
    };
    let group = Pid::from_raw(id);
    if killpg(group, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    // No event tells when another process's children are gone: look every 50 ms.
    while tokio::time::Instant::now() < deadline {
        if killpg(group, None).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tracing::warn!(
        process_group = leader,
        "processes an MCP server started did not stop in time: killed"
    );
    let _ = killpg(group, Signal::SIGKILL);
}

#[cfg(not(unix))]
pub(super) async fn stop(_leader: u32, _grace: Duration) {}
