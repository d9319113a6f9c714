//! A first program, as a newcomer writes it from these docs alone: two stacks joined
//! by an in-memory link ([`channel_pair`](crate::channel_pair)) in virtual time, a
//! UDP name service and a line-based TCP key-value store on one, a client on the
//! other that looks the store up, talks to it, meets the errors a kernel socket
//! gives (`ECONNREFUSED` from TCP and, through ICMP port unreachable, from UDP),
//! reads a counter by its nstat name and ends gracefully. It is a doc test:
//! `cargo test --doc -p lowtide-tokio` compiles and runs it, so it cannot fall
//! behind the API.
//!
//! To run it on a TUN device instead, make the two [`Net`](crate::Net)s' devices
//! [`TunPacketDevice`](crate::TunPacketDevice)s (see the crate's front page) and
//! drop `start_paused`. Pausing the clock needs tokio's `test-util` feature.
//!
//! ```
//! use lowtide_tokio::lowtide::{Config, Stack};
//! use lowtide_tokio::{channel_pair, Net, TcpListener, TcpStream, UdpSocket};
//! use std::collections::HashMap;
//! use std::io::{self, ErrorKind};
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//!
//! /// A stack with one address. The seed is no secret: `Net::new` keys the
//! /// stack's sequence numbers and ports from the OS (`getrandom(2)`).
//! fn host(ip: &str) -> Stack {
//!     let mut stack = Stack::new(Config::default(), 0);
//!     stack.add_address(ip.parse().expect("an address"));
//!     stack
//! }
//!
//! /// "SET key value" and "GET key", one reply line each, until the client's FIN.
//! async fn kv_server(listener: TcpListener) -> io::Result<usize> {
//!     let (stream, _peer) = listener.accept().await?;
//!     let (rd, mut wr) = stream.into_split();
//!     let mut lines = BufReader::new(rd).lines();
//!     let mut store: HashMap<String, String> = HashMap::new();
//!     let mut served = 0;
//!     while let Some(line) = lines.next_line().await? {
//!         let words: Vec<&str> = line.split_whitespace().collect();
//!         let reply = match words.as_slice() {
//!             ["SET", k, v] => {
//!                 store.insert(k.to_string(), v.to_string());
//!                 "OK".to_string()
//!             }
//!             ["GET", k] => store.get(*k).cloned().unwrap_or_else(|| "NONE".into()),
//!             _ => "ERR".into(),
//!         };
//!         wr.write_all(format!("{reply}\n").as_bytes()).await?;
//!         served += 1;
//!     }
//!     Ok(served)
//! }
//!
//! /// A name service over UDP: a name in, "address:port" out (empty if unknown).
//! async fn name_server(sock: UdpSocket) -> io::Result<()> {
//!     let mut buf = [0; 512];
//!     loop {
//!         let (n, from) = sock.recv_from(&mut buf).await?;
//!         let answer = match &buf[..n] {
//!             b"kv.test" => "10.0.0.2:7000",
//!             _ => "",
//!         };
//!         sock.send_to(answer.as_bytes(), from).await?;
//!     }
//! }
//!
//! /// Asks the name service for `name`, waiting at most a second.
//! async fn resolve(net: &Net, name: &str) -> io::Result<SocketAddr> {
//!     let sock = UdpSocket::bind(net, "0.0.0.0:0")?;
//!     sock.connect("10.0.0.2:53").await?;
//!     sock.send(name.as_bytes()).await?;
//!     let mut buf = [0; 512];
//!     let n = tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf)).await??;
//!     let text = std::str::from_utf8(&buf[..n]).map_err(io::Error::other)?;
//!     text.parse()
//!         .map_err(|_| io::Error::new(ErrorKind::NotFound, format!("no such name: {name}")))
//! }
//!
//! #[tokio::main(flavor = "current_thread", start_paused = true)]
//! async fn main() -> io::Result<()> {
//!     // 5 ms each way; under the paused clock this takes no wall time.
//!     let (dev_a, dev_b) = channel_pair(Duration::from_millis(5));
//!     let client = Net::new(host("10.0.0.1"), dev_a);
//!     let server = Net::new(host("10.0.0.2"), dev_b);
//!     println!("{client:?}");
//!
//!     let kv = tokio::spawn(kv_server(TcpListener::bind(&server, "10.0.0.2:7000")?));
//!     let names = tokio::spawn(name_server(UdpSocket::bind(&server, "10.0.0.2:53")?));
//!
//!     // Errors are std's, with Linux's errno: a closed TCP port...
//!     let e = TcpStream::connect(&client, "10.0.0.2:7001").await.unwrap_err();
//!     assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
//!     assert_eq!(e.raw_os_error(), Some(111));
//!     // ...and a closed UDP port (the server's stack answers ICMP port unreachable,
//!     // which a connected UDP socket reports on its next receive).
//!     let stray = UdpSocket::bind(&client, "0.0.0.0:0")?;
//!     stray.connect("10.0.0.2:9").await?;
//!     stray.send(b"anyone?").await?;
//!     let e = stray.recv(&mut [0; 64]).await.unwrap_err();
//!     assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
//!     // An unknown name is our own error.
//!     let e = resolve(&client, "nowhere.test").await.unwrap_err();
//!     assert_eq!(e.kind(), ErrorKind::NotFound);
//!
//!     // Look the store up, then talk to it.
//!     let addr = resolve(&client, "kv.test").await?;
//!     let stream = TcpStream::connect(&client, addr).await?;
//!     stream.set_nodelay(true)?;
//!     println!("{stream:?}");
//!     let (rd, mut wr) = stream.into_split();
//!     let mut replies = BufReader::new(rd).lines();
//!     let script = [
//!         ("SET colour blue", "OK"),
//!         ("GET colour", "blue"),
//!         ("GET size", "NONE"),
//!         ("DELETE colour", "ERR"),
//!     ];
//!     for (request, want) in script {
//!         wr.write_all(format!("{request}\n").as_bytes()).await?;
//!         let got = replies.next_line().await?;
//!         assert_eq!(got.as_deref(), Some(want), "{request}");
//!     }
//!     // Our FIN ends the server's loop; its FIN ends our reader.
//!     wr.shutdown().await?;
//!     assert_eq!(replies.next_line().await?, None);
//!     assert_eq!(kv.await??, script.len());
//!     names.abort();
//!
//!     // Counters by their nstat names, as `nstat` shows them on Linux.
//!     let c = client.counters();
//!     let opens = c.by_name("TcpActiveOpens").expect("a known counter");
//!     assert_eq!(opens, 2, "the refused connect and the store's");
//!     assert!(c.by_name("UdpOutDatagrams").unwrap() >= 3);
//!
//!     // A graceful end: close every socket, then let the FINs and ACKs leave
//!     // before the runtime (and the driver tasks) stop.
//!     drop((wr, replies, stray));
//!     client.shutdown(Duration::from_secs(5)).await?;
//!     server.shutdown(Duration::from_secs(5)).await
//! }
//! ```
