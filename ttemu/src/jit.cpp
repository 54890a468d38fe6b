// Kernel JIT: each kernel source is compiled with the host g++ into a shared object, cached under the SHA-256 of
// everything that affects the object (source, compile-time args, defines, CB formats, flags, the emulator headers it
// can include, the launcher) and nothing else: no checkout, cache or kernel directory is in the key (cache_key), so
// two checkouts of the same sources share their objects. Each is sealed with the SHA-256 of the object itself
// (<key>.so.sha256): an object that does not match its seal (truncated, corrupted, swapped) is compiled again, never
// loaded. Every compile goes through $TTEMU_KERNEL_CC when it is set (a launcher, as ccache is: tilefarm's
// preprocesses and checks the kernel, then compiles exactly what it checked).
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "runtime.h"
#include "sha256.h"

extern char** environ;

#ifndef TTEMU_DEFAULT_INCLUDE_DIR
#define TTEMU_DEFAULT_INCLUDE_DIR ""
#endif

namespace ttemu {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void walk(const std::string& dir, std::vector<std::string>& out) {
    DIR* d = opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        std::string p = dir + "/" + n;
        struct stat st{};
        if (stat(p.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode))
            walk(p, out);
        else
            out.push_back(p);
    }
    closedir(d);
}

std::string include_dir() {
    const char* env = std::getenv("TTEMU_INCLUDE_DIR");
    std::string dir = env && *env ? env : TTEMU_DEFAULT_INCLUDE_DIR;
    if (dir.empty())
        host_fail("kernel-compile", "TTEMU_INCLUDE_DIR is not set and libttemu has no built-in include dir", 5);
    return dir;
}

const std::string& headers_hash() {
    static std::string h = [] {
        std::vector<std::string> files;
        walk(include_dir(), files);
        std::sort(files.begin(), files.end());
        Sha256 hs;
        for (auto& f : files) {
            hs.field(f.substr(include_dir().size()));
            hs.field(read_file(f));
        }
        return hs.hex();
    }();
    return h;
}

std::string cache_dir() {
    const char* env = std::getenv("TTEMU_CACHE_DIR");
    std::string dir;
    if (env && *env) {
        dir = env;
    } else {
        const char* home = std::getenv("HOME");
        dir = std::string(home && *home ? home : "/tmp") + "/.cache/tilefarm/ttemu";
    }
    std::string partial;
    std::stringstream ss(dir);
    std::string part;
    if (!dir.empty() && dir[0] == '/') partial = "";
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        partial += "/" + part;
        mkdir(partial.c_str(), 0755);
    }
    return dir + "/kernels";
}

std::string join(const std::vector<std::uint32_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// A Metal 2.0 kernel's generated headers: the name of their directory under the cache, their content's hash (so
// the compile command, which names it, keys the kernel cache on them).
std::string generated_headers_name(const KernelDef& k) {
    return "generated-" + Sha256().field(generated_bindings_header(k)).field(generated_args_header(k)).hex();
}

// ...written there; a file that does not hold that content is written again. Returns the directory.
std::string generated_headers_dir(const KernelDef& k) {
    std::string bindings = generated_bindings_header(k), args = generated_args_header(k);
    std::string dir = cache_dir() + "/" + generated_headers_name(k);
    mkdir(dir.c_str(), 0755);
    for (auto& [name, text] : {std::pair<const char*, const std::string&>{"kernel_bindings_generated.h", bindings},
                               std::pair<const char*, const std::string&>{"kernel_args_generated.h", args}}) {
        std::string path = dir + "/" + name, tmp = path + ".tmp." + std::to_string(getpid());
        if (read_file(path) == text) continue;
        std::ofstream(tmp) << text;
        std::rename(tmp.c_str(), path.c_str());  // atomic: concurrent processes write the same content
    }
    return dir;
}

// The launcher every kernel compile goes through ($TTEMU_KERNEL_CC, words separated by spaces), or none.
std::vector<std::string> launcher() {
    std::vector<std::string> words;
    if (const char* env = std::getenv("TTEMU_KERNEL_CC"); env && *env) {
        std::stringstream ss(env);
        for (std::string word; ss >> word;) words.push_back(word);
    }
    return words;
}

// The object holds what its seal (<object>.sha256) says.
bool sealed_intact(const std::string& object) {
    std::string seal = read_file(object + ".sha256");
    while (!seal.empty() && (seal.back() == '\n' || seal.back() == ' ')) seal.pop_back();
    return seal.size() == 64 && seal == sha256_file(object);
}

// Seal a freshly compiled object and publish it (then its seal) into place; a reader between the two renames sees
// a seal that does not match and compiles again.
bool publish_sealed(const std::string& built, const std::string& object) {
    std::string digest = sha256_file(built);
    if (digest.empty()) return false;
    std::string seal_tmp = built + ".sha256";
    std::ofstream(seal_tmp) << digest << "\n";
    return std::rename(built.c_str(), object.c_str()) == 0 &&
           std::rename(seal_tmp.c_str(), (object + ".sha256").c_str()) == 0;
}

// Where a compile command finds its files: the launcher's words, the emulator's include directory, the directory of
// the kernel's generated headers. A real command names the real ones; the cache key names them by what they are.
struct Places {
    std::vector<std::string> launcher;
    std::string include, generated;
};

std::vector<std::string> compile_command(const KernelDef& k, const ProgramCBView& view, const std::string& src,
                                         const std::string& out, const Places& places) {
    const char* cxx_env = std::getenv("TTEMU_CXX");
    std::string cxx = cxx_env && *cxx_env ? cxx_env : "g++";
    const ArchSpec& arch = *device().arch;
    std::vector<std::string> cmd = places.launcher;
    cmd.insert(cmd.end(),
               {cxx, "-std=c++20", "-O1", "-fPIC", "-shared", "-g0",
                // the JIT's warning policy (metalium_api.md §6.5)
                "-Wall", "-Werror", "-Wno-unknown-pragmas", "-Wno-deprecated-declarations",
                "-Wno-error=multistatement-macros", "-Wno-error=parentheses", "-Wno-error=unused-but-set-variable",
                "-Wno-unused-variable", "-Wno-unused-function", "-I" + places.include});
    // Kernels from a TT-Metalium tree (ttnn's, read from the wheel) include "ttnn/operations/..." relative to
    // TT_METAL_HOME, as the real JIT's include path has it; our device headers come first.
    if (const char* home = std::getenv("TT_METAL_HOME"); home && *home)
        for (const char* sub : {"", "/ttnn", "/ttnn/cpp"}) cmd.push_back(std::string("-I") + home + sub);
    std::string sizes, formats;
    for (std::uint32_t i = 0; i < kMaxCBs; ++i) {
        sizes += (i ? "," : "") + std::to_string(view.tile_sizes[i]);
        formats += (i ? "," : "") + std::to_string(view.formats[i]);
    }
    cmd.push_back("-DKERNEL_COMPILE_TIME_ARGS=" + join(k.compile_args));
    if (!k.named_args.empty()) {
        std::string map;
        for (auto& [name, value] : k.named_args)
            map += (map.empty() ? "" : ",") + ("{\"" + name + "\"," + std::to_string(value) + "}");
        cmd.push_back("-DKERNEL_COMPILE_TIME_ARG_MAP=" + map);
    }
    cmd.push_back("-DTTEMU_CB_TILE_SIZES=" + sizes);
    cmd.push_back("-DTTEMU_CB_FORMATS=" + formats);
    cmd.push_back(arch.name == "wormhole_b0" ? "-DARCH_WORMHOLE" : "-DARCH_BLACKHOLE");
    cmd.push_back("-DNUM_DRAM_BANKS=" + std::to_string(arch.dram_banks));
    cmd.push_back("-DKERNEL_BUILD");
    cmd.push_back("-DTTEMU_EMULATOR=1");
    if (k.role == Role::Compute) {
        cmd.push_back("-DTTEMU_COMPUTE_KERNEL=1");
        cmd.push_back("-DUCK_CHLKC_MATH");  // the TRISC program kernels see (one thread runs unpack, math and pack)
        // ...and the PACK program's own code paths: kernels guard pack-thread-only calls with it (ttnn's streaming
        // SDPA packs its output tiles only `#ifdef TRISC_PACK`). TRISC_MATH / TRISC_UNPACK stay undefined: their
        // guarded code is raw SFPI / Tensix instructions, which the emulator supplies through its own headers.
        cmd.push_back("-DTRISC_PACK");
        cmd.push_back(strformat("-DTTEMU_DST_ACCUM_MODE=%d", k.fp32_dest_acc ? 1 : 0));
        cmd.push_back(strformat("-DTTEMU_DST_FULL_SYNC=%d", k.dst_full_sync ? 1 : 0));
        cmd.push_back(strformat("-DTTEMU_MATH_FIDELITY=%d", k.math_fidelity));
        cmd.push_back(strformat("-DTTEMU_APPROX=%d", k.approx ? 1 : 0));
    } else {
        cmd.push_back(k.role == Role::Writer ? "-DCOMPILE_FOR_BRISC" : "-DCOMPILE_FOR_NCRISC");
        cmd.push_back(strformat("-DPROCESSOR_INDEX=%d", k.role == Role::Writer ? 0 : 1));
        cmd.push_back(strformat("-DNOC_INDEX=%d", k.noc));
    }
    for (auto& [name, value] : k.defines) cmd.push_back("-D" + name + "=" + value);
    if (k.named.enabled) {  // included before the kernel, as the real JIT's prolog does
        for (const char* h : {"/kernel_bindings_generated.h", "/kernel_args_generated.h"}) {
            cmd.push_back("-include");
            cmd.push_back(places.generated + h);
        }
    }
    cmd.push_back(src);
    cmd.push_back("-o");
    cmd.push_back(out);
    return cmd;
}

// The places of a real compile: every file where it is.
Places real_places(const KernelDef& k) {
    return {launcher(), include_dir(), k.named.enabled ? generated_headers_dir(k) : ""};
}

// The launcher as the cache key names it: its program by its real path (a virtual environment's python is the
// interpreter it links to, the same in every checkout), the other words as they are (tilefarm's name the kernel
// check's rules: kernel_check.rules_digest).
const std::vector<std::string>& launcher_identity() {
    static const std::vector<std::string> words = [] {
        std::vector<std::string> w = launcher();
        if (!w.empty() && w[0].find('/') != std::string::npos) {
            if (char* real = realpath(w[0].c_str(), nullptr)) {
                w[0] = real;
                std::free(real);
            }
        }
        return w;
    }();
    return words;
}

// A file's #include lines: (the quote, '<' or '"', and the name) for each, whatever #if it sits under (more files,
// never fewer); false when a line names its file in a way this cannot read (a macro).
bool include_lines(const std::string& text, std::vector<std::pair<char, std::string>>& out) {
    for (std::size_t pos = 0; pos < text.size();) {
        std::size_t end = std::min(text.find('\n', pos), text.size());
        auto skip_blanks = [&](std::size_t i) {
            while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
            return i;
        };
        std::size_t i = skip_blanks(pos);
        if (i < end && text[i] == '#') {
            i = skip_blanks(i + 1);
            bool word_ends =
                i + 7 >= end || !(std::isalnum(static_cast<unsigned char>(text[i + 7])) || text[i + 7] == '_');
            if (text.compare(i, 7, "include") == 0 && word_ends) {
                i = skip_blanks(i + 7);
                char open = i < end ? text[i] : 0, close = open == '<' ? '>' : open == '"' ? '"' : 0;
                std::size_t stop = close ? text.find(close, i + 1) : std::string::npos;
                if (!close || stop >= end) return false;
                out.emplace_back(open, text.substr(i + 1, stop - i - 1));
            }
        }
        pos = end + 1;
    }
    return true;
}

// `path` with its "." and ".." parts resolved as written (no link followed); a relative path stays relative.
std::string lexically_normal(const std::string& path) {
    bool absolute = !path.empty() && path[0] == '/';
    std::vector<std::string> parts;
    std::stringstream ss(path);
    for (std::string part; std::getline(ss, part, '/');) {
        if (part.empty() || part == ".") continue;
        if (part == ".." && !parts.empty() && parts.back() != "..")
            parts.pop_back();
        else if (part != ".." || !absolute)
            parts.push_back(part);
    }
    std::string out = absolute ? "/" : "";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
    return out.empty() ? "." : out;
}

bool regular_file(const std::string& path) {
    struct stat st{};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string real_path(const std::string& path) {
    char* real = realpath(path.c_str(), nullptr);
    std::string out = real ? real : path;
    std::free(real);
    return out;
}

std::string parent_dir(const std::string& path) {
    std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The emulator headers a kernel can include, as "<include>/<path>" and their text: every file of the include
// directory that the kernel, the generated headers given with -include, or a header they reach name in an #include
// line, found by g++'s search order (the including file's directory for "...", then each -I directory of
// compile_command: the include directory first, then TT_METAL_HOME's). Headers outside the include directory (a
// ttnn kernel's, from TT_METAL_HOME) are followed, not keyed (as before). False when a line cannot be read: the
// caller keys by every header. A change of a header no kernel includes (the host API's) then rebuilds no kernel.
bool kernel_headers(const KernelDef& k, std::map<std::string, std::string>& found) {
    const std::string include = real_path(include_dir());
    std::vector<std::string> search{include};
    if (const char* home = std::getenv("TT_METAL_HOME"); home && *home)
        for (const char* sub : {"", "/ttnn", "/ttnn/cpp"}) search.push_back(std::string(home) + sub);
    std::vector<std::pair<std::string, std::string>> pending;  // (directory for "..." includes, text)
    pending.emplace_back(k.path.empty() ? "" : parent_dir(k.path), k.source);
    if (k.named.enabled)
        for (const std::string& text : {generated_bindings_header(k), generated_args_header(k)})
            pending.emplace_back(cache_dir() + "/" + generated_headers_name(k), text);
    std::set<std::string> seen;
    while (!pending.empty()) {
        auto [directory, text] = std::move(pending.back());
        pending.pop_back();
        std::vector<std::pair<char, std::string>> lines;
        if (!include_lines(text, lines)) return false;
        for (auto& [quote, name] : lines) {
            std::vector<std::string> places;
            if (quote == '"' && !directory.empty()) places.push_back(directory);
            places.insert(places.end(), search.begin(), search.end());
            for (auto& place : places) {
                std::string path = lexically_normal(place + "/" + name);
                if (!regular_file(path)) continue;
                if (seen.insert(path).second) {
                    std::string content = read_file(path);
                    if (path.compare(0, include.size() + 1, include + "/") == 0)
                        found["<include>" + path.substr(include.size())] = content;
                    pending.emplace_back(parent_dir(path), std::move(content));
                }
                break;
            }
        }
    }
    return true;
}

// What a kernel's object depends on among the headers: the ones it can include (kernel_headers), or every header of
// the include directory when those cannot be told. Memoized by the kernel's source and generated headers.
std::string kernel_headers_hash(const KernelDef& k) {
    static std::map<std::string, std::string> memo;
    static std::mutex memo_mu;  // programs may load their kernels from more than one host thread
    std::lock_guard<std::mutex> lock(memo_mu);
    std::string generated = k.named.enabled ? generated_headers_name(k) : "";
    std::string memo_key = Sha256().field(k.path).field(k.source).field(generated).hex();
    if (auto it = memo.find(memo_key); it != memo.end()) return it->second;
    std::map<std::string, std::string> found;
    Sha256 h;
    std::string listed;
    if (kernel_headers(k, found)) {
        h.field("kernel headers");
        for (auto& [name, content] : found) {
            h.field(name).field(content);
            listed += (listed.empty() ? "" : " ") + name;
        }
    } else {
        h.field("every header").field(headers_hash());
        listed = "every header";
    }
    if (std::getenv("TTEMU_LOG_JIT"))
        std::fprintf(stderr, "ttemu: jit: headers of %s: %s\n", k.path.empty() ? "<source>" : k.path.c_str(),
                     listed.c_str());
    return memo.emplace(memo_key, h.hex()).first->second;
}

// The kernel cache's key: the compile command with its places named by what they hold (the include directory by the
// headers of it the kernel can include, the generated headers by their content's hash, the source by its text), never
// by where they are: a checkout, a cache directory or a test's temporary directory changes nothing.
std::string cache_key(const KernelDef& k, const ProgramCBView& view) {
    Places named{launcher_identity(), "<include>", "<cache>/" + (k.named.enabled ? generated_headers_name(k) : "")};
    Sha256 h;
    for (auto& word : compile_command(k, view, "SRC", "OUT", named)) h.field(word);
    h.field(k.source).field(kernel_headers_hash(k)).field(__VERSION__);
    return h.hex();
}

// Runs argv, returns exit status; stdout+stderr go to `log_path`.
int run_command(const std::vector<std::string>& argv, const std::string& log_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid;
    int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string shell_join(const std::vector<std::string>& argv) {
    std::string s;
    for (auto& a : argv) s += (s.empty() ? "" : " ") + ("'" + a + "'");
    return s;
}

std::mutex g_loaded_mu;
std::map<std::string, void (*)()> g_loaded;  // cache key -> entry point, per process

}  // namespace

void jit_compile_kernels(std::vector<KernelDef*>& kernels, const std::vector<ProgramCBView>& views) {
    auto t0 = std::chrono::steady_clock::now();
    std::string dir = cache_dir();
    mkdir(dir.c_str(), 0755);
    struct Job {
        KernelDef* k;
        std::string key, so, src;
        std::vector<std::string> cmd;
        bool hit = false;
        int rc = 0;
        std::string log;
    };
    std::vector<Job> jobs;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
        KernelDef* k = kernels[i];
        Job job;
        job.k = k;
        job.key = cache_key(*k, views[i]);
        job.so = dir + "/" + job.key + ".so";
        // Compile the file in place so relative #includes resolve; string kernels get a file in the cache.
        job.src = k->path;
        if (job.src.empty()) {
            job.src = dir + "/" + job.key + ".cpp";
            std::ofstream(job.src) << k->source;
        }
        job.cmd =
            compile_command(*k, views[i], job.src,
                            job.so + ".tmp." + std::to_string(getpid()) + "." + std::to_string(i), real_places(*k));
        job.hit = sealed_intact(job.so);  // a missing or unsealed object, or one its seal disowns: compiled
        jobs.push_back(std::move(job));
    }
    std::vector<std::thread> workers;
    std::size_t parallel = std::max(1u, std::thread::hardware_concurrency());
    std::size_t next = 0;
    std::mutex next_mu;
    auto work = [&] {
        for (;;) {
            Job* job;
            {
                std::lock_guard<std::mutex> lk(next_mu);
                while (next < jobs.size() && jobs[next].hit) ++next;
                if (next >= jobs.size()) return;
                job = &jobs[next++];
            }
            // Two kernels with the same key in one program compile once.
            bool dup = false;
            for (auto& other : jobs)
                if (&other < job && other.key == job->key) dup = true;
            if (dup) continue;
            std::string tmp = job->cmd.back();
            std::string log_path = tmp + ".log";
            if (std::getenv("TTEMU_LOG_JIT")) std::fprintf(stderr, "ttemu: jit: %s\n", shell_join(job->cmd).c_str());
            job->rc = run_command(job->cmd, log_path);
            job->log = read_file(log_path);
            unlink(log_path.c_str());
            if (job->rc != 0 || !publish_sealed(tmp, job->so)) {
                unlink(tmp.c_str());
                if (job->rc == 0) job->rc = -1, job->log = "could not publish the object into " + job->so;
            }
        }
    };
    for (std::size_t i = 0; i < std::min(parallel, jobs.size()); ++i) workers.emplace_back(work);
    for (auto& w : workers) w.join();

    // TTEMU_JIT_ONLY=1: every kernel compiled (or found) and none loaded, then the program ends here: a build of a
    // program's kernels that runs no code of theirs, not even a static constructor (the sandbox's trusted kernel
    // build, workers/sandbox/ops.py build_emulator_kernels).
    const char* only = std::getenv("TTEMU_JIT_ONLY");
    bool jit_only = only && std::string(only) == "1";
    Device& dev = device();
    for (auto& job : jobs) {
        if (job.rc != 0)
            host_fail("kernel-compile",
                      strformat("%s kernel '%s' failed to compile:\n%s\ncommand: %s", role_name(job.k->role),
                                job.k->path.c_str(), job.log.c_str(), shell_join(job.cmd).c_str()),
                      5);
        if (job.hit)
            ++dev.jit_cache_hits;
        else
            ++dev.jit_compiled;
        if (jit_only) continue;
        std::lock_guard<std::mutex> lk(g_loaded_mu);
        auto it = g_loaded.find(job.key);
        if (it == g_loaded.end()) {
            void* handle = dlopen(job.so.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!handle) host_fail("kernel-compile", strformat("dlopen(%s): %s", job.so.c_str(), dlerror()), 5);
            auto entry = reinterpret_cast<void (*)()>(dlsym(handle, "_Z11kernel_mainv"));
            if (!entry)
                host_fail(
                    "kernel-compile",
                    strformat("kernel '%s' does not define 'void kernel_main()' (the 0.81.1 entry point for every "
                              "kernel type)",
                              job.k->path.c_str()),
                    5);
            it = g_loaded.emplace(job.key, entry).first;
        }
        job.k->entry = it->second;
    }
    dev.jit_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (jit_only) {
        write_report();
        std::fflush(nullptr);
        std::_Exit(0);
    }
}

}  // namespace ttemu
