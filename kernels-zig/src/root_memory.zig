//! The C ABI's memory exports (root.zig): copies into and out of an
//! allocation (`cf_write`, `cf_copy`), a file mapped read-only
//! (`cf_map_file`), zeroed aligned anonymous memory (`cf_alloc`), their
//! release and madvise; in the wasm32 build, the stand-in for a mapping
//! that the host fills (`cf_map_alloc`) and the scratch area buffer
//! arguments are copied through (`cf_scratch`). Each validates what it is
//! given with root.zig's checks before calling memory.zig
//! (memory_wasm.zig in the wasm32 build).

const std = @import("std");
const abi = @import("abi.zig");
const root = @import("root.zig");
const memory = if (root.is_wasm) @import("memory_wasm.zig") else @import("memory.zig");

const is_wasm = root.is_wasm;
const Status = abi.Status;
const ok = root.ok;
const statusOf = root.statusOf;
const typedMut = root.typedMut;

/// int32_t cf_write(int32_t handle, size_t offset, const uint8_t *src, size_t len):
/// copies len bytes into an allocation.
export fn cf_write(handle: i32, offset: usize, src: ?[*]const u8, len: usize) i32 {
    if (len == 0) return ok();
    const s = src orelse return Status.invalid_arg.code();
    return memory.copyIn(handle, offset, s[0..len]);
}

/// int32_t cf_map_file(const uint8_t *path, size_t path_len, uint64_t out[2]):
/// maps a regular file read-only; writes {address, length}; returns a handle.
export fn cf_map_file(path: ?[*]const u8, path_len: usize, out: ?*anyopaque) i32 {
    const p = path orelse return Status.invalid_arg.code();
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    if (path_len > memory.max_path_bytes) return Status.invalid_arg.code();
    var v: memory.View = undefined;
    const h = memory.mapFile(p[0..path_len], &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// int32_t cf_map_alloc(size_t len, uint64_t out[2]): wasm32 build only. A
/// zeroed read-only region of len bytes (kind "map") that the host fills
/// with a file's bytes before using the handle: the wasm stand-in for
/// cf_map_file (memory_wasm.zig).
fn cfMapAlloc(len: usize, out: ?*anyopaque) callconv(.c) i32 {
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var v: memory.View = undefined;
    const h = memory.mapAlloc(len, &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// size_t cf_scratch(size_t len): wasm32 build only. The address of a
/// 16-byte aligned area of at least len bytes that the host copies buffer
/// arguments through (grown on demand, never shrunk); 0 when memory is out.
fn cfScratch(len: usize) callconv(.c) usize {
    const S = struct {
        var area: []align(16) u8 = &.{};
    };
    if (len > S.area.len) {
        const want = @max(len, 1 << 20);
        const fresh = std.heap.wasm_allocator.alignedAlloc(u8, 16, want) catch return 0;
        if (S.area.len > 0) std.heap.wasm_allocator.free(S.area);
        S.area = fresh;
    }
    return @intFromPtr(S.area.ptr);
}

comptime {
    if (is_wasm) {
        @export(&cfMapAlloc, .{ .name = "cf_map_alloc" });
        @export(&cfScratch, .{ .name = "cf_scratch" });
    }
}

/// int32_t cf_alloc(size_t len, size_t alignment, uint64_t out[2]): zeroed,
/// aligned anonymous memory; writes {address, length}; returns a handle.
export fn cf_alloc(len: usize, alignment: usize, out: ?*anyopaque) i32 {
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var v: memory.View = undefined;
    const h = memory.alloc(len, alignment, &v);
    if (h > 0) {
        o[0] = v.ptr;
        o[1] = v.len;
    }
    return h;
}

/// int32_t cf_release(int32_t handle): unmaps or frees.
export fn cf_release(handle: i32) i32 {
    return memory.release(handle);
}

/// int32_t cf_madvise(int32_t handle, size_t offset, size_t len, uint32_t advice)
export fn cf_madvise(handle: i32, offset: usize, len: usize, advice: u32) i32 {
    return memory.advise(handle, offset, len, advice);
}

/// int32_t cf_copy(int32_t handle, size_t offset, uint8_t *dst, size_t len):
/// copies len bytes of a region from offset into dst, after bounds checks.
export fn cf_copy(handle: i32, offset: usize, dst: ?[*]u8, len: usize) i32 {
    if (len == 0) return memory.copyOut(handle, offset, &[_]u8{});
    const d = dst orelse return Status.invalid_arg.code();
    return memory.copyOut(handle, offset, d[0..len]);
}
