//! iperf3 test protocol.
