//! CPU feature detection (cpuid + xgetbv) and core counting. The library is
//! built for baseline x86-64; this decides at run time which kernel variant
//! the CPU and the OS can run.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");

const assert = std.debug.assert;

comptime {
    assert(builtin.cpu.arch == .x86_64);
}

const feature_bits = @import("features.zig");
pub const Feature = feature_bits.Feature;
pub const bit = feature_bits.bit;
pub const physicalCores = @import("cores.zig").physicalCores;

const CpuidResult = struct { eax: u32, ebx: u32, ecx: u32, edx: u32 };

fn cpuid(leaf: u32, subleaf: u32) CpuidResult {
    var eax: u32 = undefined;
    var ebx: u32 = undefined;
    var ecx: u32 = undefined;
    var edx: u32 = undefined;
    asm volatile ("cpuid"
        : [_] "={eax}" (eax),
          [_] "={ebx}" (ebx),
          [_] "={ecx}" (ecx),
          [_] "={edx}" (edx),
        : [_] "{eax}" (leaf),
          [_] "{ecx}" (subleaf),
    );
    return .{ .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx };
}

fn xgetbv0() u64 {
    var lo: u32 = undefined;
    var hi: u32 = undefined;
    asm volatile ("xgetbv"
        : [_] "={eax}" (lo),
          [_] "={edx}" (hi),
        : [_] "{ecx}" (@as(u32, 0)),
    );
    return (@as(u64, hi) << 32) | lo;
}

inline fn has(reg: u32, b: u5) bool {
    return (reg >> b) & 1 == 1;
}

/// Detects the features of this CPU that the OS also enables.
pub fn detect() u64 {
    var set: u64 = 0;
    const max_leaf = cpuid(0, 0).eax;
    if (max_leaf < 1) return 0;
    const l1 = cpuid(1, 0);
    if (has(l1.ecx, 0)) set |= bit(.sse3);
    if (has(l1.ecx, 9)) set |= bit(.ssse3);
    if (has(l1.ecx, 19)) set |= bit(.sse4_1);
    if (has(l1.ecx, 20)) set |= bit(.sse4_2);
    if (has(l1.ecx, 23)) set |= bit(.popcnt);
    if (has(l1.ecx, 13)) set |= bit(.cx16);
    if (has(l1.ecx, 12)) set |= bit(.fma);
    if (has(l1.ecx, 29)) set |= bit(.f16c);
    if (has(l1.ecx, 22)) set |= bit(.movbe);
    const osxsave = has(l1.ecx, 27);
    if (has(l1.ecx, 26) and osxsave) set |= bit(.xsave);
    const xcr0: u64 = if (osxsave) xgetbv0() else 0;
    const ymm_ok = (xcr0 & 0x6) == 0x6; // SSE and AVX state
    const zmm_ok = ymm_ok and (xcr0 & 0xe0) == 0xe0; // opmask, ZMM_Hi256, Hi16_ZMM
    if (has(l1.ecx, 28) and ymm_ok) set |= bit(.avx);
    if (max_leaf >= 7) {
        const l7 = cpuid(7, 0);
        if (has(l7.ebx, 3)) set |= bit(.bmi1);
        if (has(l7.ebx, 8)) set |= bit(.bmi2);
        if (ymm_ok) {
            if (has(l7.ebx, 5)) set |= bit(.avx2);
        }
        if (zmm_ok) {
            if (has(l7.ebx, 16)) set |= bit(.avx512f);
            if (has(l7.ebx, 17)) set |= bit(.avx512dq);
            if (has(l7.ebx, 28)) set |= bit(.avx512cd);
            if (has(l7.ebx, 30)) set |= bit(.avx512bw);
            if (has(l7.ebx, 31)) set |= bit(.avx512vl);
            if (has(l7.ecx, 11)) set |= bit(.avx512vnni);
        }
        if (max_leaf >= 7 and ymm_ok) {
            const l71 = cpuid(7, 1);
            if (has(l71.eax, 4)) set |= bit(.avxvnni);
        }
    }
    const ext = cpuid(0x80000000, 0).eax;
    if (ext >= 0x80000001) {
        const e1 = cpuid(0x80000001, 0);
        if (has(e1.ecx, 0)) set |= bit(.lahf_lm);
        if (has(e1.ecx, 5)) set |= bit(.lzcnt);
    }
    // Without the OS saving YMM/ZMM state these are unusable.
    if (set & bit(.avx) == 0) set &= ~(bit(.avx2) | bit(.fma) | bit(.f16c) | bit(.avxvnni));
    return set;
}

/// The CPU's brand string (cpuid leaves 0x80000002..4), trimmed; empty if
/// the CPU does not report one.
pub fn brand(out: *[48]u8) []const u8 {
    if (cpuid(0x80000000, 0).eax < 0x80000004) return out[0..0];
    for (0..3) |i| {
        const r = cpuid(0x80000002 + @as(u32, @intCast(i)), 0);
        for ([_]u32{ r.eax, r.ebx, r.ecx, r.edx }, 0..) |word, j| {
            std.mem.writeInt(u32, out[i * 16 + j * 4 ..][0..4], word, .little);
        }
    }
    const end = std.mem.indexOfScalar(u8, out, 0) orelse out.len;
    return std.mem.trim(u8, out[0..end], " ");
}

/// Whether the panel kernels should prefetch ahead of their stream
/// themselves (panel_prefetch.zig `panel_prefetch`): yes, except on AMD CPUs,
/// whose hardware prefetchers did better alone (measured on Zen 4; Intel
/// measured on Ice Lake).
pub fn panelPrefetchPays() bool {
    return !isAmd();
}

/// Whether cpuid's vendor is "AuthenticAMD" (false off x86-64).
pub fn isAmd() bool {
    const r = cpuid(0, 0);
    // "AuthenticAMD" in ebx, edx, ecx.
    return r.ebx == 0x68747541 and r.edx == 0x69746e65 and r.ecx == 0x444d4163;
}

/// Features each variant's object was compiled to assume (its CPU level).
pub fn required(v: abi.Variant) u64 {
    const v2 = bit(.sse3) | bit(.ssse3) | bit(.sse4_1) | bit(.sse4_2) | bit(.popcnt) | bit(.cx16) | bit(.lahf_lm);
    const v3 = v2 | bit(.avx) | bit(.avx2) | bit(.fma) | bit(.f16c) | bit(.bmi1) | bit(.bmi2) | bit(.lzcnt) | bit(.movbe) | bit(.xsave);
    const v4 = v3 | bit(.avx512f) | bit(.avx512bw) | bit(.avx512cd) | bit(.avx512dq) | bit(.avx512vl);
    return switch (v) {
        .scalar => 0,
        .avx2 => v3,
        .avx512vnni => v4 | bit(.avx512vnni),
        .avxvnni => v3 | bit(.avxvnni),
        // aarch64 variants: never on an x86-64 CPU (these bits stay clear).
        .neon => bit(.asimd),
        .neon_dotprod => bit(.asimd) | bit(.asimddp),
    };
}

pub fn supports(features: u64, v: abi.Variant) bool {
    const need = required(v);
    return features & need == need;
}

/// The best variant the given feature set can run.
pub fn best(features: u64) abi.Variant {
    if (supports(features, .avx512vnni)) return .avx512vnni;
    if (supports(features, .avxvnni)) return .avxvnni;
    if (supports(features, .avx2)) return .avx2;
    return .scalar;
}

test "detect agrees with the compile-time baseline and picks a runnable variant" {
    const f = detect();
    // Every x86-64 CPU has SSE2; the detected best variant must be supported.
    try std.testing.expect(supports(f, best(f)));
    try std.testing.expect(supports(f, .scalar));
    // Masking features down forces lower variants.
    try std.testing.expectEqual(abi.Variant.scalar, best(0));
    try std.testing.expect(physicalCores() >= 1);
    var buf: [48]u8 = undefined;
    const name = brand(&buf);
    for (name) |ch| try std.testing.expect(ch >= 0x20 and ch < 0x7f);
    // The vendor decides the panel prefetch: AMD's brand strings say so.
    if (std.mem.startsWith(u8, name, "AMD ")) try std.testing.expect(!panelPrefetchPays());
    if (std.mem.startsWith(u8, name, "Intel(R) ")) try std.testing.expect(panelPrefetchPays());
}
