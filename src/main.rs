//! The `agentry` binary: parse the command line and run it.

use clap::Parser;

/// mimalloc gives freed memory back to the system (glibc's malloc keeps most of it after a
/// burst of connections).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = agentry::cli::Cli::parse();
    std::process::exit(agentry::cli::run(cli).await);
}
