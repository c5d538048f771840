//! The `agentry` binary: parse the command line and run it.

use clap::Parser;
use tikv_jemalloc_ctl::{Access, AsName};

/// jemalloc, set up by [`return_freed_memory`], gives back what a burst of connections took
/// within seconds. Measured with `scripts/memory_burst.py` (release builds, SQLite, 1,500
/// live followers opened and dropped twice, 3 runs; RSS in MB, idle / peak / 5 s after):
/// jemalloc 37.5–38.2 / 125.6–130.2 / 54.2–58.2; mimalloc 54.1–56.3 / 169.3–183.1 /
/// 154.1–176.7 (its idle threads keep their freed pages), 91.7–99.4 after with
/// `MIMALLOC_PURGE_DELAY=0`; glibc's malloc kept what a burst took as well.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    return_freed_memory();
    let cli = agentry::cli::Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the async runtime starts");
    let code = runtime.block_on(agentry::cli::run(cli));
    std::process::exit(code);
}

/// Background threads purge what was freed after a second, whether or not the process
/// allocates again (without them jemalloc purges only when a thread allocates: an idle
/// server kept 101–122 MB after the same bursts). jemalloc also serves the C library's
/// `malloc` (SQLite's page caches and statements), so those pages are purged alike. Left as
/// they are when `MALLOC_CONF` is set (an operator's choice, e.g.
/// `background_thread:true,dirty_decay_ms:0`).
fn return_freed_memory() {
    if std::env::var_os("MALLOC_CONF").is_some() {
        return;
    }
    let dirty_decay_ms: isize = 1000;
    // New arenas take `arenas.*`; arena 0 exists already.
    let _ = b"arenas.dirty_decay_ms\0".name().write(dirty_decay_ms);
    let _ = b"arena.0.dirty_decay_ms\0".name().write(dirty_decay_ms);
    let _ = b"arenas.muzzy_decay_ms\0".name().write(0isize);
    let _ = b"arena.0.muzzy_decay_ms\0".name().write(0isize);
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
}
