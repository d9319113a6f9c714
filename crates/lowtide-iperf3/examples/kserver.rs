//! Runs a one-off server over the kernel's sockets and prints its report.
use lowtide_iperf3::kernel::run_server;
use lowtide_iperf3::{json_report, text_report, ServerConfig};

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(5201);
    let mut cfg = ServerConfig::new(([127, 0, 0, 1], port).into());
    cfg.one_off = true;
    run_server(cfg, |o| {
        println!("{}", text_report(o));
        println!("{:#}", json_report(o));
    })
}
