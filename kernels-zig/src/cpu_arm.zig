//! CPU feature detection for aarch64 Linux: the kernel's hardware
//! capability words (getauxval(AT_HWCAP) and AT_HWCAP2), which say what the
//! CPU has and the kernel lets user space use; `cpu.zig` is the x86-64
//! counterpart. The library is built for baseline ARMv8-A (which has
//! Advanced SIMD); this decides at run time which variant may run.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");

const assert = std.debug.assert;

comptime {
    assert(builtin.cpu.arch == .aarch64);
}

const feature_bits = @import("features.zig");
pub const Feature = feature_bits.Feature;
pub const bit = feature_bits.bit;
pub const physicalCores = @import("cores.zig").physicalCores;

const AT_HWCAP: usize = 16;
const AT_HWCAP2: usize = 26;

// Bits of AT_HWCAP and AT_HWCAP2 (linux/arch/arm64/include/uapi/asm/hwcap.h).
const hwcap_asimd: u6 = 1;
const hwcap_fphp: u6 = 9;
const hwcap_asimdhp: u6 = 10;
const hwcap_asimddp: u6 = 20;
const hwcap2_i8mm: u6 = 13;

/// Features of this CPU from the two capability words.
pub fn fromHwcaps(hwcap: u64, hwcap2: u64) u64 {
    var set: u64 = 0;
    if ((hwcap >> hwcap_asimd) & 1 == 1) set |= bit(.asimd);
    if ((hwcap >> hwcap_fphp) & 1 == 1) set |= bit(.fphp);
    if ((hwcap >> hwcap_asimdhp) & 1 == 1) set |= bit(.asimdhp);
    if ((hwcap >> hwcap_asimddp) & 1 == 1) set |= bit(.asimddp);
    if ((hwcap2 >> hwcap2_i8mm) & 1 == 1) set |= bit(.i8mm);
    // dotprod and i8mm are Advanced SIMD instructions.
    if (set & bit(.asimd) == 0) set &= ~(bit(.asimddp) | bit(.i8mm) | bit(.asimdhp));
    return set;
}

/// libc's getauxval: the library is loaded into a process whose start code
/// is not Zig's, so std.os.linux's own copy (which reads the auxiliary vector
/// Zig's start code saved) would see nothing.
pub fn detect() u64 {
    comptime assert(builtin.link_libc);
    return fromHwcaps(std.c.getauxval(AT_HWCAP), std.c.getauxval(AT_HWCAP2));
}

/// Features each variant's object was compiled to assume.
pub fn required(v: abi.Variant) u64 {
    return switch (v) {
        .scalar => 0,
        .neon => bit(.asimd),
        .neon_dotprod => bit(.asimd) | bit(.asimddp),
        // x86-64 variants are not in an aarch64 library.
        .avx2, .avx512vnni, .avxvnni => bit(.sse3) | bit(.avx2),
    };
}

pub fn supports(set: u64, v: abi.Variant) bool {
    const need = required(v);
    if (v == .avx2 or v == .avx512vnni or v == .avxvnni) return false;
    return set & need == need;
}

/// The best variant the given feature set can run.
pub fn best(set: u64) abi.Variant {
    if (supports(set, .neon_dotprod)) return .neon_dotprod;
    if (supports(set, .neon)) return .neon;
    return .scalar;
}

/// Panel kernels prefetch ahead (panel_prefetch.zig `panel_prefetch`): not
/// measured on aarch64; kept as on x86 CPUs other than AMD's.
pub fn panelPrefetchPays() bool {
    return true;
}

/// Not an x86 CPU: never AMD's (cpu.zig's isAmd).
pub fn isAmd() bool {
    return false;
}

/// The CPU's implementer and part from MIDR_EL1 as the kernel exposes it
/// (sysfs), e.g. "aarch64 MIDR 0x413fd0c1"; empty when it cannot be read.
pub fn brand(out: *[48]u8) []const u8 {
    const file = std.fs.openFileAbsoluteZ("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", .{}) catch return out[0..0];
    defer file.close();
    var buf: [32]u8 = undefined;
    const n = file.readAll(&buf) catch return out[0..0];
    const text = std.mem.trim(u8, buf[0..n], " \n\t");
    const midr = std.fmt.parseInt(u64, text, 0) catch return out[0..0];
    return std.fmt.bufPrint(out, "aarch64 MIDR 0x{x:0>8}", .{midr}) catch out[0..0];
}

test "hardware capability words map to features and variants" {
    const asimd_dp = (@as(u64, 1) << hwcap_asimd) | (@as(u64, 1) << hwcap_asimddp);
    try std.testing.expectEqual(abi.Variant.neon_dotprod, best(fromHwcaps(asimd_dp, 0)));
    try std.testing.expectEqual(abi.Variant.neon, best(fromHwcaps(@as(u64, 1) << hwcap_asimd, 0)));
    // dotprod without Advanced SIMD is not usable.
    try std.testing.expectEqual(abi.Variant.scalar, best(fromHwcaps(@as(u64, 1) << hwcap_asimddp, 0)));
    try std.testing.expect(fromHwcaps(0, @as(u64, 1) << hwcap2_i8mm) == 0);
    try std.testing.expect(!supports(~@as(u64, 0), .avx2));
}

test "detect picks a runnable variant on this CPU" {
    const f = detect();
    try std.testing.expect(supports(f, best(f)));
    try std.testing.expect(physicalCores() >= 1);
    var buf: [48]u8 = undefined;
    for (brand(&buf)) |ch| try std.testing.expect(ch >= 0x20 and ch < 0x7f);
}
