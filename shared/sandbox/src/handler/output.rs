//! The command's combined output, kept in bounded memory: the first 32 KiB, a ring of the last
//! 32 KiB and a count of everything, however much the command prints.

use agent_ports::sandbox::{cut_middle, MAX_OUTPUT_CHARS};

pub(crate) const HEAD_BYTES: usize = 32 * 1024;
pub(crate) const TAIL_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    /// The last bytes after the head; once full, `ring_start` is where the oldest byte is.
    ring: Vec<u8>,
    ring_start: usize,
    pub total: u64,
}

impl Capture {
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.head.len() < HEAD_BYTES {
            let take = data.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        if data.len() >= TAIL_BYTES {
            self.ring.clear();
            self.ring.extend_from_slice(&data[data.len() - TAIL_BYTES..]);
            self.ring_start = 0;
            return;
        }
        if self.ring.len() < TAIL_BYTES {
            let take = data.len().min(TAIL_BYTES - self.ring.len());
            self.ring.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        // The ring is full here (or `data` is empty): overwrite from the oldest byte on.
        while !data.is_empty() {
            let take = data.len().min(TAIL_BYTES - self.ring_start);
            self.ring[self.ring_start..self.ring_start + take].copy_from_slice(&data[..take]);
            self.ring_start = (self.ring_start + take) % TAIL_BYTES;
            data = &data[take..];
        }
    }

    fn tail(&self) -> Vec<u8> {
        let mut tail = Vec::with_capacity(self.ring.len());
        tail.extend_from_slice(&self.ring[self.ring_start..]);
        tail.extend_from_slice(&self.ring[..self.ring_start]);
        tail
    }

    /// The output as the model gets it (lossy UTF-8, cut to `MAX_OUTPUT_CHARS`) and the bytes left
    /// out, those the ring dropped included.
    pub(crate) fn render(&self) -> (String, u64) {
        render_output(&self.head, &self.tail(), self.total)
    }
}

/// The output from its head, the last bytes after the head and the total count, as the model gets
/// it; every backend that keeps a head and a tail cuts the same way.
pub(crate) fn render_output(head: &[u8], tail: &[u8], total: u64) -> (String, u64) {
    let dropped = total.saturating_sub((head.len() + tail.len()) as u64);
    if dropped == 0 {
        let mut all = head.to_vec();
        all.extend_from_slice(tail);
        return cut_middle(&String::from_utf8_lossy(&all), MAX_OUTPUT_CHARS, 0);
    }
    // A character split by the gap would show as U+FFFD: its pieces are left out instead.
    let kept = complete_prefix(head);
    let skip = tail.iter().take(3).take_while(|&&byte| byte & 0xC0 == 0x80).count();
    let omitted = dropped + (head.len() - kept + skip) as u64;
    let joined = format!("{}{}", String::from_utf8_lossy(&head[..kept]), String::from_utf8_lossy(&tail[skip..]));
    let chars = joined.chars().count();
    // The gap is in the middle already; cutting at least one character makes the note stand there
    // even when the rest would fit.
    cut_middle(&joined, MAX_OUTPUT_CHARS.min(chars.saturating_sub(1)), omitted)
}

/// The length of `bytes` without a UTF-8 sequence cut off at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(err) if err.error_len().is_none() => err.valid_up_to(),
        _ => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut capture = Capture::default();
        capture.push(b"hello ");
        capture.push(b"world\n");
        assert_eq!(capture.render(), ("hello world\n".to_owned(), 0));
    }

    #[test]
    fn long_output_keeps_its_head_and_tail_and_counts_the_rest() {
        let mut capture = Capture::default();
        let mut all = Vec::new();
        for n in 0..20_000u32 {
            let line = format!("line {n}\n");
            all.extend_from_slice(line.as_bytes());
            capture.push(line.as_bytes());
        }
        assert_eq!(capture.total, all.len() as u64);
        assert_eq!(&capture.head[..], &all[..HEAD_BYTES]);
        assert_eq!(capture.tail(), &all[all.len() - TAIL_BYTES..]);
        let (text, omitted) = capture.render();
        assert!(text.starts_with("line 0\nline 1\n"));
        assert!(text.ends_with("line 19999\n"));
        assert_eq!(text.chars().count() - format!("\n\n... [{omitted} bytes of output omitted] ...\n\n").len(), 30_000);
        assert_eq!(omitted, all.len() as u64 - 30_000);
    }

    #[test]
    fn large_writes_and_split_characters_are_handled() {
        let mut capture = Capture::default();
        // One byte before and after puts both ends of the gap inside a two-byte character.
        capture.push(b"x");
        capture.push("é".repeat(40_000).as_bytes());
        capture.push(b"b");
        let (text, omitted) = capture.render();
        assert!(!text.contains('\u{FFFD}'));
        assert!(text.starts_with("xé") && text.ends_with("éb"));
        assert_eq!(capture.total, 80_002);
        assert!(omitted > 0 && text.contains(&format!("[{omitted} bytes of output omitted]")));
    }
}
