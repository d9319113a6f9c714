//! Hostile and extreme input, and random segments: nothing panics, everything is counted.

mod extremes;
mod fuzz;
mod hostile;
mod rmem_flood;
mod tcp_mem;
