//! tcp_timer.c: zero-window probes, the write timeout, keepalive.

mod keepalive;
mod persist;
