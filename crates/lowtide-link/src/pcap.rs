//! A pcap capture of what crosses the links: wire segments as sent (after
//! segmentation, before the link's impairments), raw IP (LINKTYPE_RAW, 101),
//! microsecond timestamps in virtual time.
//!
//! Segments are recorded when the NIC schedules them, each with its own
//! serialization start time; packets of the two directions may therefore be written
//! slightly out of time order (tcpdump and tshark read such files).

use lowtide::Instant;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A pcap file being written.
pub struct PcapSink {
    writer: PcapWriter<BufWriter<File>>,
    /// The file, named in errors.
    path: PathBuf,
    error: Option<String>,
    /// Reused to join a packet's two parts.
    scratch: Vec<u8>,
}

impl PcapSink {
    /// Creates (truncates) the file and writes its header.
    pub fn create(path: &Path) -> Result<PcapSink, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::native(),
            snaplen: 65_535,
            ..PcapHeader::default()
        };
        let writer =
            PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| io_text(path, e))?;
        Ok(PcapSink {
            writer,
            path: path.to_path_buf(),
            error: None,
            scratch: Vec::new(),
        })
    }

    /// Writes a packet kept in two parts (headers and payload apart), as one.
    pub fn write_parts(&mut self, at: Instant, head: &[u8], body: &[u8]) {
        if body.is_empty() {
            return self.write(at, head);
        }
        let mut whole = std::mem::take(&mut self.scratch);
        whole.clear();
        whole.extend_from_slice(head);
        whole.extend_from_slice(body);
        self.write(at, &whole);
        self.scratch = whole;
    }

    /// Records one packet seen at `at`; the first write error is kept and later
    /// writes are skipped.
    pub fn write(&mut self, at: Instant, packet: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let ts = Duration::from_nanos(at.as_nanos());
        let p = PcapPacket::new(ts, packet.len() as u32, packet);
        if let Err(e) = self.writer.write_packet(&p) {
            self.error = Some(io_text(&self.path, e));
        }
    }

    /// Flushes the file; returns the first error, if any.
    pub fn finish(self) -> Result<(), String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut w = self.writer.into_writer();
        std::io::Write::flush(&mut w).map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

/// "PATH: why" for a pcap error: the I/O error's own text (pcap-file's says "Error
/// reading bytes" for a failed write).
fn io_text(path: &Path, e: PcapError) -> String {
    match e {
        PcapError::IoError(io) => format!("{}: {io}", path.display()),
        e => format!("{}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_error_says_why() {
        let path = Path::new("/dev/full");
        let mut sink = PcapSink::create(path).unwrap();
        for i in 0..20 {
            sink.write(Instant::from_nanos(i), &[0x45; 1500]);
        }
        let e = sink.finish().unwrap_err();
        assert!(e.starts_with("/dev/full: No space left on device"), "{e}");
    }
}
