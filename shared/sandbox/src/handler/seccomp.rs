//! The seccomp filter every command runs under: the kernel's doors a command has no use for
//! (namespaces, mounts, tracing, BPF, keyrings, modules, sockets other than AF_UNIX) answer EPERM,
//! so tools fail gracefully; `clone3` answers ENOSYS, so libc falls back to `clone`, whose
//! namespace flags the filter can see. Built once with seccompiler, before any fork; bubblewrap
//! loads it from a memfd (`--add-seccomp-fd`), a plain process installs it in the child before exec.

use std::collections::BTreeMap;
use std::io::{Seek, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The two programs: the EPERM denials, and `clone3`'s ENOSYS (one filter has one match action).
pub(crate) struct Programs {
    pub deny: BpfProgram,
    pub clone3: BpfProgram,
}

/// The namespace flags `clone` may not carry (CLONE_NEWTIME fits only `clone3` and `unshare`).
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// x32 system calls are x86_64's numbers with this bit; denied under both numbers.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

/// Calls denied whatever their arguments.
fn denied_calls() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        // io_uring can open sockets and reach files without the calls above being made.
        libc::SYS_io_uring_setup,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_syslog,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_uselib]);
    calls
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|err| err.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|err| err.to_string())
}

/// Adds `number` (and its x32 twin) with `rules` (empty: always).
fn insert(rules: &mut BTreeMap<i64, Vec<SeccompRule>>, number: i64, chain: Vec<SeccompRule>) {
    #[cfg(target_arch = "x86_64")]
    rules.insert(number | X32_BIT, chain.clone());
    rules.insert(number, chain);
}

fn build() -> Result<Programs, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|err| err.to_string())?;
    let mut deny = BTreeMap::new();
    for number in denied_calls() {
        insert(&mut deny, number, Vec::new());
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| rule(vec![condition(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    insert(&mut deny, libc::SYS_clone, clone_rules);
    // No network beyond the machine's own AF_UNIX sockets: no AF_INET/AF_INET6 (the Lambda
    // Runtime API is on loopback), no AF_NETLINK, no AF_PACKET.
    let socket_rule = vec![rule(vec![condition(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])?];
    insert(&mut deny, libc::SYS_socket, socket_rule);
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let deny = SeccompFilter::new(deny, SeccompAction::Allow, eperm, arch).map_err(|err| err.to_string())?;
    let mut clone3 = BTreeMap::new();
    insert(&mut clone3, libc::SYS_clone3, Vec::new());
    let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
    let clone3 = SeccompFilter::new(clone3, SeccompAction::Allow, enosys, arch).map_err(|err| err.to_string())?;
    Ok(Programs {
        deny: deny.try_into().map_err(|err: seccompiler::BackendError| err.to_string())?,
        clone3: clone3.try_into().map_err(|err: seccompiler::BackendError| err.to_string())?,
    })
}

/// The programs, built on first use (a few microseconds) and kept for the process.
pub(crate) fn programs() -> Result<&'static Programs, String> {
    static PROGRAMS: OnceLock<Result<Programs, String>> = OnceLock::new();
    PROGRAMS.get_or_init(build).as_ref().map_err(|err| format!("the seccomp filter could not be built: {err}"))
}

/// A program as bubblewrap reads it: the raw `sock_filter` array, in a memfd at offset 0.
pub(crate) fn memfd(program: &[sock_filter]) -> std::io::Result<OwnedFd> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; a non-negative result is ours.
    let fd = unsafe { libc::memfd_create(c"sandbox-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    file.write_all(&bytes)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// Installs both programs on the calling thread, with no_new_privs. Only system calls on memory
/// prepared before the fork: safe between fork and exec.
///
/// # Safety
/// `programs` must stay alive and unchanged during the call (a `'static` from [`programs`] is).
pub(crate) unsafe fn install(programs: &Programs) -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    for program in [&programs.deny, &programs.clone3] {
        let prog = libc::sock_fprog {
            len: program.len() as libc::c_ushort,
            filter: program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at a program that outlives the call; the kernel copies it.
        let done = unsafe {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog)
        };
        if done != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
