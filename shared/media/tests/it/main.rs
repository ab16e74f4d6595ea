//! media's tests, in one binary: sniffing, images (bounds, downscaling, animation, orientation),
//! PDFs (bytes, encryption, damage, pages), and truncated and garbled versions of every format.

mod fixtures;
mod hostile;
mod images;
mod pdfs;
mod sniffing;
