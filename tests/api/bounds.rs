//! One tenant cannot take the server from the others: bounded history reads, open streams,
//! webhook delivery and quotas that hold under races, and the smaller refusals that keep a
//! request from growing a response or reaching a 500.

mod fairness;
mod memory;
mod races;
mod sessions;
mod smaller;
mod streams;
