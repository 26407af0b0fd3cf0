//! `cpu.zig` for the wasm32 build: there is no cpuid. The one kernel
//! variant compiled in (the scalar reference, built with simd128) is the
//! best and only one; the others are "unsupported".

const abi = @import("abi.zig");

pub fn detect() u64 {
    return 0;
}

pub fn supports(features: u64, v: abi.Variant) bool {
    _ = features;
    return v == .scalar;
}

pub fn best(features: u64) abi.Variant {
    _ = features;
    return .scalar;
}

/// The scalar kernel compiled for wasm32 never prefetches.
pub fn panelPrefetchPays() bool {
    return false;
}

/// Not an x86 CPU: never AMD's (cpu.zig's isAmd).
pub fn isAmd() bool {
    return false;
}

pub fn physicalCores() u32 {
    return 1;
}

const name = "WebAssembly (wasm32, simd128)";

pub fn brand(storage: *[48]u8) []const u8 {
    @memcpy(storage[0..name.len], name);
    return storage[0..name.len];
}
