//! The booted kernel, as the guest sees it.

use crate::testing::{
    harness::Verdict,
    suite::{
        case::{On, VmCase},
        results::Results,
    },
};

/// `uname -r` in the guest.
pub const UNAME: VmCase = VmCase {
    heading: "uname",
    on: On::Every,
    workload: r"
uname -r > /tmp/uname
emit uname /tmp/uname
",
    judge: |j| {
        j.verdict(
            "reference",
            "uname -r is the booted kernel",
            &["uname"],
            |r| check_uname(r, j.release()),
        );
    },
};

pub fn check_uname(files: &Results<'_>, release: &str) -> Verdict {
    let got = files.read("uname")?;
    let got = got.trim();
    if release.is_empty() {
        Ok(format!("{got} (release of this kernel unknown)"))
    } else if got == release {
        Ok(got.to_owned())
    } else {
        Err(format!("guest says {got}, expected {release}"))
    }
}
