//! Congestion control: CUBIC and slow start (tcp_cubic.c, tcp_cong.c).

mod cubic;
mod receiver_acks;
mod slow_start;
