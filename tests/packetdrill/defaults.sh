#!/bin/sh
# lowtide's own defaults for its packetdrill scripts: the production-like values
# Linux's packetdrill suite starts from (buffers, timestamps, SACK, CUBIC, RACK-TLP,
# no ECN), so that a script behaves the same on lowtide and on the kernel
# (scripts/packetdrill --kernel). Every script sources it first.
sysctl -q net.ipv4.tcp_rmem="4096 540000 15728640" \
          net.ipv4.tcp_wmem="4096 262144 4194304" \
          net.ipv4.tcp_timestamps=1 net.ipv4.tcp_sack=1 net.ipv4.tcp_dsack=1 \
          net.ipv4.tcp_window_scaling=1 net.ipv4.tcp_syn_retries=5 \
          net.ipv4.tcp_synack_retries=5 net.ipv4.tcp_frto=2 net.ipv4.tcp_reordering=3 \
          net.ipv4.tcp_slow_start_after_idle=0 net.ipv4.tcp_early_retrans=4 \
          net.ipv4.tcp_recovery=1 net.ipv4.tcp_tso_win_divisor=3 net.ipv4.tcp_ecn=0 \
          net.ipv4.tcp_pacing_ss_ratio=200 net.ipv4.tcp_pacing_ca_ratio=120 \
          net.ipv4.tcp_syncookies=1
sysctl -q net.ipv4.tcp_congestion_control=cubic
sysctl -q net.ipv4.tcp_notsent_lowat=4294967295
tc qdisc add dev tun0 root pfifo
