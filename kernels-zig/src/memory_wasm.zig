//! `memory.zig` for the wasm32 build: regions are allocations in linear
//! memory, tracked in the same fixed table of generation-checked handles,
//! with the same range checks and status codes. There is no mmap, madvise
//! or file system:
//!
//! - A "mapped file" is a region of kind `map` that `cf_map_alloc` creates
//!   zeroed at the file's size; the host (ffi/wasm_backend.ts) copies the
//!   file in with ordinary reads before anything else sees the handle.
//!   `cf_map_file` itself returns `io_base - ENOSYS`. Like a native mapping
//!   the region is refused by `cf_write`; the bytes are a private copy, so
//!   the `changed` check (a file truncated or rewritten after mapping) never
//!   fires here.
//! - `cf_madvise` checks the handle, the advice and the range; `dontneed`
//!   on an allocation zeroes its pages (what the kernel does natively), any
//!   other advice does nothing.
//! - Released memory goes back to the allocator and is reused; linear
//!   memory itself never shrinks.

const std = @import("std");
const abi = @import("abi.zig");

const assert = std.debug.assert;

const common = @import("handles.zig");
pub const max_regions = common.max_regions;
/// Largest allocation accepted: a wasm32 address space is 4 GiB.
pub const max_alloc_bytes: usize = 3 << 30;
pub const max_alignment = common.max_alignment;
pub const max_path_bytes = common.max_path_bytes;

pub const Kind = common.Kind;

pub const Advice = common.Advice;

const Region = struct {
    kind: Kind = .free,
    generation: u32 = 0,
    /// The allocator's block (over-allocated for the alignment).
    raw: []u8 = &.{},
    ptr: usize = 0,
    len: usize = 0,
    pins: u32 = 0,
};

var regions: [max_regions]Region = [_]Region{.{}} ** max_regions;
const handles = common.Table(Region, &regions);
const handleOf = handles.handleOf;
const lookup = handles.lookup;
const claim = handles.claim;
const nextGeneration = handles.nextGeneration;
const gpa = std.heap.wasm_allocator;

pub const View = common.View;

/// ENOSYS in Linux numbering, like every other `io_base - errno` status.
const enosys = 38;

/// There is no file system: always `io_base - ENOSYS`.
pub fn mapFile(path: []const u8, out: *View) i32 {
    _ = out;
    if (path.len == 0 or path.len > max_path_bytes) return abi.Status.invalid_arg.code();
    return abi.ioStatus(enosys);
}

fn create(kind: Kind, len: usize, alignment: usize, out: *View) i32 {
    if (!std.math.isPowerOfTwo(alignment) or alignment > max_alignment) return abi.Status.alignment.code();
    const a = @max(alignment, 16);
    const extra = if (a > 16) a else 0;
    const total = std.math.add(usize, len, extra) catch return abi.Status.overflow.code();
    const index = claim() orelse return abi.Status.limit.code();
    const raw = gpa.alignedAlloc(u8, 16, total) catch return abi.Status.no_memory.code();
    const base = std.mem.alignForward(usize, @intFromPtr(raw.ptr), a);
    assert(base + len <= @intFromPtr(raw.ptr) + raw.len);
    const p: [*]u8 = @ptrFromInt(base);
    @memset(p[0..len], 0);
    const r = &regions[index];
    const generation = nextGeneration(r);
    r.* = .{ .kind = kind, .generation = generation, .raw = raw, .ptr = base, .len = len };
    out.* = .{ .ptr = base, .len = len };
    return handleOf(index, generation);
}

/// A zeroed region of kind `map` for the host to fill with a file's bytes
/// (the wasm stand-in for mapping a file). Zero-length files are allowed.
pub fn mapAlloc(len: usize, out: *View) i32 {
    if (len > max_alloc_bytes) return abi.Status.invalid_arg.code();
    return create(.map, len, 16, out);
}

/// The copy is private: nothing can change it behind the handle's back.
pub fn checkFile(handle: i32) i32 {
    if (lookup(handle, .alloc) != null or lookup(handle, .map) != null) return abi.Status.ok.code();
    return abi.Status.handle.code();
}

pub fn alloc(len: usize, alignment: usize, out: *View) i32 {
    if (len == 0 or len > max_alloc_bytes) return abi.Status.invalid_arg.code();
    return create(.alloc, len, alignment, out);
}

pub fn release(handle: i32) i32 {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    if (r.pins > 0) return abi.Status.busy.code();
    gpa.free(r.raw);
    const generation = r.generation;
    r.* = .{ .generation = generation };
    return abi.Status.ok.code();
}

/// Linux's page size on x86-64, the unit native madvise works in.
const page: usize = 4096;

/// Checks like the native madvise wrapper. Only `dontneed` on an
/// allocation has a visible effect natively (its whole pages read back as
/// zeros), so that is done here: the pages covering the range, counted from
/// the region's start, are zeroed. On a mapped file it would re-read the
/// same bytes: nothing to do. Every other advice is a hint: nothing to do.
pub fn advise(handle: i32, offset: usize, len: usize, advice_raw: u32) i32 {
    const advice = std.meta.intToEnum(Advice, advice_raw) catch return abi.Status.invalid_arg.code();
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (len == 0) return abi.Status.ok.code();
    if (advice == .dontneed and r.kind == .alloc) {
        const start = std.mem.alignBackward(usize, offset, page);
        const stop = @min(std.mem.alignForward(usize, end, page), r.len);
        const p: [*]u8 = @ptrFromInt(r.ptr);
        @memset(p[start..stop], 0);
    }
    return abi.Status.ok.code();
}

pub fn copyOut(handle: i32, offset: usize, dst: []u8) i32 {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, dst.len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (dst.len == 0) return abi.Status.ok.code();
    const src: [*]const u8 = @ptrFromInt(r.ptr);
    @memcpy(dst, src[offset..end]);
    return abi.Status.ok.code();
}

pub fn rangePtr(handle: i32, offset: usize, len: usize, err: *i32) ?[*]const u8 {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse {
        err.* = abi.Status.handle.code();
        return null;
    };
    const end = std.math.add(usize, offset, len) catch {
        err.* = abi.Status.overflow.code();
        return null;
    };
    if (end > r.len or len == 0) {
        err.* = abi.Status.range.code();
        return null;
    }
    const base: [*]const u8 = @ptrFromInt(r.ptr);
    return base + offset;
}

pub fn pin(handle: i32, out: *View, err: *i32) bool {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse {
        err.* = abi.Status.handle.code();
        return false;
    };
    r.pins += 1;
    out.* = .{ .ptr = r.ptr, .len = r.len };
    return true;
}

pub fn unpin(handle: i32) void {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse unreachable;
    assert(r.pins > 0);
    r.pins -= 1;
}

pub fn isAlloc(handle: i32) bool {
    return lookup(handle, .alloc) != null;
}

pub fn copyIn(handle: i32, offset: usize, src: []const u8) i32 {
    const r = lookup(handle, .alloc) orelse return abi.Status.handle.code();
    const end = std.math.add(usize, offset, src.len) catch return abi.Status.overflow.code();
    if (end > r.len) return abi.Status.range.code();
    if (src.len == 0) return abi.Status.ok.code();
    const dst: [*]u8 = @ptrFromInt(r.ptr);
    @memcpy(dst[offset..end], src);
    return abi.Status.ok.code();
}

pub fn view(handle: i32, out: *View) i32 {
    const r = lookup(handle, .map) orelse lookup(handle, .alloc) orelse return abi.Status.handle.code();
    out.* = .{ .ptr = r.ptr, .len = r.len };
    return abi.Status.ok.code();
}
