//! `agentry schedules …`: tenants' schedules and their run history, for operators.

use clap::Subcommand;

use super::{print_json, tenant_arg};
use crate::app::AppState;
use crate::model::ScheduleId;
use crate::store::Page;

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// A tenant's schedules, newest first, with their next occurrence.
    List {
        /// The tenant's name or id.
        tenant: String,
    },
    /// A schedule's occurrences, newest first: planned time, turn, or why none started.
    Runs {
        /// The tenant's name or id.
        tenant: String,
        /// The schedule's id (`sched_…`).
        schedule: String,
        /// The most occurrences to print.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

pub(super) async fn run(state: &AppState, command: SchedulesCommand) -> anyhow::Result<()> {
    match command {
        SchedulesCommand::List { tenant } => {
            let tenant = tenant_arg(state, &tenant).await?;
            let mut all = Vec::new();
            let mut after = None;
            loop {
                let (batch, more) = state
                    .schedules()
                    .list(&tenant, Page { after, limit: 200 })
                    .await?;
                after = batch.last().map(|s| s.id.to_uuid());
                all.extend(batch);
                if !more {
                    break;
                }
            }
            print_json(&all);
        }
        SchedulesCommand::Runs {
            tenant,
            schedule,
            limit,
        } => {
            let tenant = tenant_arg(state, &tenant).await?;
            let id: ScheduleId = schedule
                .parse()
                .map_err(|_| anyhow::anyhow!("`{schedule}` is not a schedule id (`sched_…`)"))?;
            let (runs, _) = state
                .schedules()
                .list_runs(
                    &tenant,
                    &id,
                    Page {
                        after: None,
                        limit: limit.clamp(1, 1000),
                    },
                )
                .await?;
            print_json(&runs);
        }
    }
    Ok(())
}
