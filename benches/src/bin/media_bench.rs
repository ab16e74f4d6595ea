//! The media benchmark: what `media::prepare` costs a function for the files people attach.
//!
//! Each case runs in a child process of its own (this binary again, with `--case`), so its peak RSS
//! is its own: the child reads the file, notes its resident set, runs `prepare` five times and
//! reports the median CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`, user and system:
//! `prepare` runs on the calling thread alone, and getrusage counts in whole clock ticks here) and
//! the peak RSS (VmHWM), whole and above the resident set before the first call.
//!
//! Cases: a 12-megapixel photo (JPEG, 4000 × 3000), a 48-megapixel one (8000 × 6000), an RGBA PNG
//! at the pixel bound (the most memory a decode may take), a Retina screenshot (PNG, 2880 × 1800),
//! a small PNG and a small JPEG sent unchanged, an animated GIF of 3,000 frames and a 100-page PDF.
//! Every figure is checked against its bound; the run fails (exit 1) when one is exceeded. Run with
//! `cargo run --release -p benches --bin media-bench`.

use std::io::Cursor;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use image::codecs::gif::{GifEncoder, Repeat};
use image::codecs::jpeg::JpegEncoder;
use image::{Delay, DynamicImage, Frame, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use lopdf::{dictionary, Document, Object, Stream};
use media::{prepare, Limits};

// The functions' allocator is agent-app's (mimalloc): linking the crate makes it this binary's too,
// so the peak RSS measured is what a function's decode takes.
use agent_app as _;

/// One case: its name, its file, and its bounds on the median CPU time and on the peak RSS above
/// the process before the first call.
struct Case {
    name: &'static str,
    file: fn() -> Vec<u8>,
    cpu_bound: Duration,
    rss_bound_mib: u64,
}

fn cases() -> Vec<Case> {
    vec![
        Case { name: "12 MP JPEG", file: || jpeg(&photo(4_000, 3_000)), cpu_bound: ms(800), rss_bound_mib: 80 },
        Case { name: "48 MP JPEG", file: || jpeg(&photo(8_000, 6_000)), cpu_bound: ms(3_000), rss_bound_mib: 250 },
        Case { name: "50 MP RGBA PNG", file: rgba_png_at_bound, cpu_bound: ms(3_000), rss_bound_mib: 250 },
        Case { name: "2880×1800 screenshot PNG", file: screenshot_png, cpu_bound: ms(800), rss_bound_mib: 60 },
        // Sent unchanged, but decoded once to find a broken body before a provider would.
        Case { name: "1024×768 PNG, unchanged", file: small_png, cpu_bound: ms(40), rss_bound_mib: 16 },
        Case {
            name: "1568×1176 JPEG, unchanged",
            file: || jpeg(&photo(1_568, 1_176)),
            cpu_bound: ms(40),
            rss_bound_mib: 16,
        },
        Case { name: "GIF of 3,000 frames", file: animated_gif, cpu_bound: ms(5), rss_bound_mib: 4 },
        Case { name: "100-page PDF", file: || pdf(100), cpu_bound: ms(50), rss_bound_mib: 20 },
    ]
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, name, path] = args.as_slice() {
        if flag == "--case" {
            return child(name, Path::new(path));
        }
    }
    let dir = std::env::temp_dir().join(format!("media-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    println!("## media::prepare (median CPU of 5 calls; peak RSS of the child process)\n");
    let mut failures = Vec::new();
    for case in cases() {
        let path = dir.join(case.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
        let file = (case.file)();
        std::fs::write(&path, &file).expect("the case's file written");
        let output = Command::new(std::env::current_exe().expect("this binary"))
            .args(["--case", case.name])
            .arg(&path)
            // As the template sets it for the functions.
            .env("MIMALLOC_PURGE_DELAY", "0")
            .env("MIMALLOC_ALLOW_THP", "0")
            .output()
            .expect("the child run");
        let report = String::from_utf8_lossy(&output.stdout);
        let Some(line) = report.lines().find(|line| line.starts_with("figures ")) else {
            failures.push(format!("{}: the child failed: {}", case.name, String::from_utf8_lossy(&output.stderr)));
            continue;
        };
        let figures: Vec<&str> = line.split(' ').collect();
        let (cpu_us, peak_kib, before_kib): (u64, u64, u64) =
            (figures[1].parse().unwrap(), figures[2].parse().unwrap(), figures[3].parse().unwrap());
        let outcome = figures[4..].join(" ");
        let cpu = Duration::from_micros(cpu_us);
        let growth_mib = peak_kib.saturating_sub(before_kib) / 1024;
        println!(
            "{} ({} bytes) → {outcome}: {} CPU, peak RSS {} MiB ({growth_mib} MiB above the process with \
             its input read)",
            case.name,
            file.len(),
            fmt_cpu(cpu),
            peak_kib / 1024,
        );
        if cpu > case.cpu_bound {
            failures.push(format!("{}: {} CPU, over {}", case.name, fmt_cpu(cpu), fmt_cpu(case.cpu_bound)));
        }
        if growth_mib > case.rss_bound_mib {
            failures.push(format!("{}: {growth_mib} MiB, over {} MiB", case.name, case.rss_bound_mib));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !failures.is_empty() {
        println!("\nBOUNDS EXCEEDED:\n{}", failures.join("\n"));
        std::process::exit(1);
    }
}

fn fmt_cpu(cpu: Duration) -> String {
    if cpu < ms(1) {
        format!("{} µs", cpu.as_micros())
    } else if cpu < ms(10) {
        format!("{:.2} ms", cpu.as_secs_f64() * 1e3)
    } else {
        format!("{} ms", cpu.as_millis())
    }
}

/// In the child: read the file, run `prepare` five times, print `figures CPU_US PEAK_KIB
/// BEFORE_KIB OUTCOME`.
fn child(name: &str, path: &Path) {
    let bytes = std::fs::read(path).expect("the case's file");
    let before = status_kib("VmRSS:");
    let limits = Limits::default();
    let mut cpus = Vec::new();
    let mut outcome = String::new();
    for _ in 0..5 {
        let start = thread_cpu();
        let prepared = prepare(&bytes, &limits);
        cpus.push(thread_cpu() - start);
        outcome = match prepared {
            Ok(prepared) => match (prepared.width, prepared.height, prepared.pages) {
                (Some(width), Some(height), _) => {
                    format!(
                        "{width}×{height} {} of {} bytes",
                        prepared.media_type.format().to_uppercase(),
                        prepared.bytes.len()
                    )
                }
                (_, _, Some(pages)) => format!("{pages} pages, unchanged"),
                _ => "sent".to_string(),
            },
            Err(error) => format!("refused: {error}"),
        };
    }
    cpus.sort();
    let peak = status_kib("VmHWM:");
    println!("figures {} {peak} {before} {outcome}", cpus[cpus.len() / 2].as_micros());
    eprintln!("{name}: done");
}

fn thread_cpu() -> Duration {
    let mut spec = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) };
    Duration::new(spec.tv_sec as u64, spec.tv_nsec as u32)
}

/// A figure of /proc/self/status in KiB (`VmRSS:` now, `VmHWM:` the peak).
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A photo-like image: a gradient under pseudo-random noise, which compresses like a photo.
fn photo(width: u32, height: u32) -> RgbImage {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    RgbImage::from_fn(width, height, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let noise = (seed & 0x3F) as u8;
        let gradient = |value: u32, span: u32| (value * 180 / span.max(1)) as u8;
        Rgb([
            gradient(x, width).saturating_add(noise),
            gradient(y, height).saturating_add(noise >> 1),
            gradient(x + y, width + height).saturating_add(noise >> 2),
        ])
    })
}

/// At quality 80, about what a phone writes; the noise makes it larger than a real photo's.
fn jpeg(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    JpegEncoder::new_with_quality(&mut out, 80).encode_image(image).expect("a JPEG");
    out
}

/// 7071 × 7071 RGBA, just under 50 megapixels: 200 MB decoded, from a small file (smooth content).
fn rgba_png_at_bound() -> Vec<u8> {
    let edge = 7_071;
    png(DynamicImage::ImageRgba8(RgbaImage::from_fn(edge, edge, |x, y| {
        Rgba([(x / 28) as u8, (y / 28) as u8, ((x + y) / 56) as u8, 255 - (x / 28) as u8])
    })))
}

fn png(image: DynamicImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, ImageFormat::Png).expect("a PNG");
    out.into_inner()
}

/// A screenshot-like image: flat panels, bars of "text" and a photo inset.
fn screenshot_png() -> Vec<u8> {
    let inset = photo(600, 400);
    png(DynamicImage::ImageRgb8(RgbImage::from_fn(2_880, 1_800, |x, y| {
        if (1_000..1_600).contains(&x) && (600..1_000).contains(&y) {
            *inset.get_pixel(x - 1_000, y - 600)
        } else if y < 80 {
            Rgb([40, 44, 52])
        } else if x < 400 {
            Rgb([240, 240, 240])
        } else if (y / 12) % 3 != 2 && (x / 9) % 7 != 6 && (x * 7 + y * 3) % 11 < 4 {
            Rgb([30, 30, 30])
        } else {
            Rgb([255, 255, 255])
        }
    })))
}

fn small_png() -> Vec<u8> {
    png(DynamicImage::ImageRgb8(photo(1_024, 768)))
}

fn animated_gif() -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut out, 30);
        encoder.set_repeat(Repeat::Infinite).expect("a loop");
        let frames = (0..3_000u32).map(|i| {
            let color = Rgba([(i % 256) as u8, 0, 255, 255]);
            Frame::from_parts(RgbaImage::from_pixel(16, 16, color), 0, 0, Delay::from_numer_denom_ms(10, 1))
        });
        encoder.encode_frames(frames).expect("a GIF");
    }
    out
}

fn pdf(pages: usize) -> Vec<u8> {
    let mut document = Document::with_version("1.5");
    let pages_id = document.new_object_id();
    let content = document.add_object(Stream::new(dictionary! {}, b"BT /F1 12 Tf 72 720 Td (Page) Tj ET".to_vec()));
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            let page =
                document.add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content });
            page.into()
        })
        .collect();
    let tree = dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => pages as i64 };
    document.objects.insert(pages_id, Object::Dictionary(tree));
    let catalog = document.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    document.trailer.set("Root", catalog);
    let mut out = Vec::new();
    document.save_to(&mut out).expect("a PDF");
    out
}
