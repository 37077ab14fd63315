#include "cli/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli/exit_codes.h"
#include "schema/environment.h"
#include "schema/trace_naming.h"

namespace gmt::cli {
namespace {

// What the child reports through the close-on-exec pipe when it cannot become the app. Nothing arrives when
// exec succeeds (the pipe closes).
struct ChildFailure {
  int exit_code;
  char message[1024];
};

pid_t g_child = 0;

void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

[[noreturn]] void fail_in_child(int pipe_fd, int exit_code, const std::string& message) {
  ChildFailure failure{};
  failure.exit_code = exit_code;
  std::snprintf(failure.message, sizeof failure.message, "%s", message.c_str());
  ssize_t ignored = write(pipe_fd, &failure, sizeof failure);
  (void)ignored;
  _exit(exit_code);
}

// In the child, before exec: the root trace's name is known only now (it may hold %p). Refuse to overwrite,
// and catch an unwritable directory before the app runs for hours.
void prepare_output_in_child(const LaunchSpec& spec, int pipe_fd) {
  std::string path = schema::expand_trace_pattern(spec.output_pattern, getpid(), schema::current_host_name(),
                                                  schema::launch_identity_from_environment());
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (!spec.overwrite) {
      fail_in_child(pipe_fd, kExitRunFailed,
                    "trace '" + path + "' already exists; use --force to overwrite it or -o to choose another name");
    }
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    fail_in_child(pipe_fd, kExitRunFailed, "cannot write the trace to '" + dir + "': " + std::strerror(errno));
  }
}

}  // namespace

LaunchResult launch_and_wait(const LaunchSpec& spec) {
  LaunchResult result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("cannot create a pipe: ") + std::strerror(errno);
    result.error_exit_code = kExitRunFailed;
    return result;
  }
  fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    result.error = std::string("cannot fork: ") + std::strerror(errno);
    result.error_exit_code = kExitRunFailed;
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (child == 0) {
    close(fds[0]);
    prepare_output_in_child(spec, fds[1]);
    for (const auto& [name, value] : spec.environment) setenv(name.c_str(), value.c_str(), 1);
    setenv(schema::env::kRootPid, std::to_string(getpid()).c_str(), 1);
    std::vector<char*> argv;
    for (const auto& arg : spec.command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    bool not_found = err == ENOENT || err == ENOTDIR;
    fail_in_child(fds[1], not_found ? kExitAppNotFound : kExitCannotExecute,
                  "cannot run '" + spec.command[0] + "': " + std::strerror(err));
  }

  close(fds[1]);
  ChildFailure failure{};
  ssize_t got;
  do {
    got = read(fds[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  close(fds[0]);

  // Like a shell waiting for a foreground job: Ctrl-C and Ctrl-\ reach the app through the terminal, so we
  // ignore them; a TERM or HUP sent to us alone is passed on, so the app gets to exit (and flush) cleanly.
  g_child = child;
  struct sigaction ignore {
  }, forward{}, old_int{}, old_quit{}, old_term{}, old_hup{};
  ignore.sa_handler = SIG_IGN;
  forward.sa_handler = forward_signal;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  sigaction(SIGTERM, &forward, &old_term);
  sigaction(SIGHUP, &forward, &old_hup);

  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);

  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  g_child = 0;

  result.pid = child;
  if (got == static_cast<ssize_t>(sizeof failure)) {
    result.error = failure.message;
    result.error_exit_code = failure.exit_code;
    return result;
  }
  result.started = true;
  // The child's launcher variables are ours: spec.environment sets none of them.
  result.root_trace_path = schema::expand_trace_pattern(spec.output_pattern, child, schema::current_host_name(),
                                                        schema::launch_identity_from_environment());
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + result.signal;
  }
  return result;
}

}  // namespace gmt::cli
