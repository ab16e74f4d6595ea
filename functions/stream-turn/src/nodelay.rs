//! `TCP_NODELAY` on the Lambda runtime's own connection to the Runtime API, so that the response
//! prelude and its delimiter leave at once.
//!
//! `lambda_runtime` (1.5) posts a streamed response as small separate writes: the prelude, then
//! its 8-byte delimiter, then each chunk. Its HTTP client keeps Nagle's algorithm on and offers no
//! way to pass a connector (`Runtime::new` builds the client itself), so the delimiter waits for
//! the prelude's acknowledgement, which a delayed ACK holds back about 40 ms, and a Function URL's
//! client sees nothing until the delimiter is in. The option is set here on the socket itself:
//! every TCP socket of this process whose peer is the Runtime API, before the response is posted.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{BorrowedFd, RawFd};

/// The Runtime API's addresses, from `AWS_LAMBDA_RUNTIME_API` (`host:port`).
pub fn runtime_api_addresses() -> Vec<SocketAddr> {
    std::env::var("AWS_LAMBDA_RUNTIME_API")
        .ok()
        .and_then(|api| api.to_socket_addrs().ok())
        .map(|addresses| addresses.collect())
        .unwrap_or_default()
}

/// Sets `TCP_NODELAY` on every socket of this process connected to one of `peers` that does not
/// have it yet. Returns how many such sockets there are (with the option now set).
///
/// The runtime reads the next event on a pooled connection and posts the response on the same one,
/// so calling this in the handler covers the connection the response goes out on.
pub fn set_on_connections_to(peers: &[SocketAddr]) -> io::Result<usize> {
    let mut connections = 0;
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Some(fd) = entry?.file_name().to_str().and_then(|name| name.parse::<RawFd>().ok()) else { continue };
        // SAFETY: `fd` was open when listed and is only borrowed for the calls below. Should
        // another thread close it meanwhile and its number be reused, the calls act on that
        // descriptor instead: they fail on anything but a socket, and change nothing but
        // TCP_NODELAY on a TCP connection to the Runtime API, which is what is wanted.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let Ok(peer) = socket.peer_addr() else { continue };
        if !peer.as_socket().is_some_and(|peer| peers.contains(&peer)) {
            continue;
        }
        if !socket.tcp_nodelay()? {
            socket.set_tcp_nodelay(true)?;
        }
        connections += 1;
    }
    Ok(connections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_the_option_on_connections_to_the_peer_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_api = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let to_other = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_api.nodelay().unwrap() && !to_other.nodelay().unwrap());
        assert_eq!(set_on_connections_to(&[listener.local_addr().unwrap()]).unwrap(), 1);
        assert!(to_api.nodelay().unwrap(), "the connection to the peer has TCP_NODELAY");
        assert!(!to_other.nodelay().unwrap(), "another connection is left alone");
    }
}
