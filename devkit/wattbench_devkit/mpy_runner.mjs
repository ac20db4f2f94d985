// Runs Python code under the official MicroPython WebAssembly build (npm
// @micropython/micropython-webassembly-pyscript) for the test suite.
//
// Reads one JSON job on stdin:
//   {"module": path to micropython.mjs, "mounts": [[host dir, fs dir], ...],
//    "files": {fs path: text}, "data": any JSON, "code": python source, "heapsize": bytes,
//    "repeat": optional python source run again and again while the global AGAIN is true}
// Each run of `repeat` is a separate top-level call: this build only collects garbage between
// top-level calls (it cannot scan WebAssembly locals for roots), so a long program that wants its
// garbage freed must return to the top level now and then.
// Host directories are copied into the emulated file system (only .py, .mpy and .json files), `data` is
// written to /data.json, then `code` runs. Exit status 0 on success; on a Python exception the
// traceback goes to stderr and the status is 1.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const job = JSON.parse(readFileSync(0, "utf8"));
const { loadMicroPython } = await import(job.module);

function ensureDir(FS, dir) {
  let cur = "";
  for (const part of dir.split("/").filter(Boolean)) {
    cur += "/" + part;
    try {
      FS.mkdir(cur);
    } catch (e) {
      // exists
    }
  }
}

function copyTree(FS, src, dst) {
  ensureDir(FS, dst);
  for (const name of readdirSync(src)) {
    if (name === "__pycache__") continue;
    const full = join(src, name);
    if (statSync(full).isDirectory()) {
      copyTree(FS, full, dst + "/" + name);
    } else if (name.endsWith(".py") || name.endsWith(".mpy") || name.endsWith(".json")) {
      FS.writeFile(dst + "/" + name, readFileSync(full));
    }
  }
}

const out = [];
const mp = await loadMicroPython({
  heapsize: job.heapsize || 16 * 1024 * 1024,
  stdout: (line) => process.stdout.write(line + "\n"),
  stderr: (line) => process.stderr.write(line + "\n"),
});
for (const [src, dst] of job.mounts || []) copyTree(mp.FS, src, dst);
for (const [path, text] of Object.entries(job.files || {})) {
  ensureDir(mp.FS, path.substring(0, path.lastIndexOf("/")));
  mp.FS.writeFile(path, text);
}
mp.FS.writeFile("/data.json", JSON.stringify(job.data === undefined ? null : job.data));
try {
  mp.runPython(job.code);
  if (job.repeat) {
    while (mp.globals.get("AGAIN")) mp.runPython(job.repeat);
  }
} catch (error) {
  if (error.name === "PythonError") {
    process.stderr.write(error.message + "\n");
    process.exit(1);
  }
  throw error;
}
