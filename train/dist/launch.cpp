// Launcher environment and the TCP rendezvous (launch.h).
//
// Rendezvous wire format (host byte order: the ranks of one job run on one architecture):
//   rank r -> rank 0:  u32 magic 'AIMR', u32 version, i32 rank, i32 world, u64 n, n bytes
//   rank 0 -> rank r:  u8 status; 0: world x (u64 n, n bytes) in rank order; 1: u64 n, message
#include "train/dist/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tensor/check.h"

namespace aim::dist {

// ---- environment -------------------------------------------------------------------------

namespace {

int parse_int(const char* name, const char* value, int lo, int hi) {
  const std::string v = value;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v.c_str(), &end, 10);
  AIM_CHECK(!v.empty() && end && *end == '\0' && errno == 0 && x >= lo && x <= hi,
            "dist launch: environment variable ", name, "='", v, "' is not an integer in [", lo,
            ", ", hi, "]");
  return int(x);
}

}  // namespace

LaunchEnv detect_launch_env(const std::function<const char*(const char*)>& getenv) {
  struct Scheme {
    const char *rank, *world, *local, *source;
  };
  const Scheme schemes[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_*"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_*"},
  };
  LaunchEnv e;
  for (const Scheme& s : schemes) {
    const char* r = getenv(s.rank);
    const char* w = getenv(s.world);
    if (!r && !w) continue;
    AIM_CHECK(r && w, "dist launch: ", r ? s.rank : s.world, " is set but ", r ? s.world : s.rank,
              " is not (", s.source, " launcher variables must come together)");
    e.source = s.source;
    e.world_size = parse_int(s.world, w, 1, 1 << 20);
    e.rank = parse_int(s.rank, r, 0, e.world_size - 1);
    const char* l = getenv(s.local);
    if (l) {
      e.local_rank = parse_int(s.local, l, 0, e.world_size - 1);
    } else {
      AIM_CHECK(e.world_size == 1, "dist launch: ", s.rank, " and ", s.world, " are set but ",
                s.local, " is not: it picks this process's GPU");
      e.local_rank = 0;
    }
    break;
  }
  if (e.world_size > 1) {
    const char* a = getenv("MASTER_ADDR");
    const char* p = getenv("MASTER_PORT");
    // mpirun's processes may run the mpi backend, which needs no rendezvous: there the check
    // waits for a backend that needs one (require_rendezvous).
    if (e.source == "OMPI_COMM_WORLD_*" && !a && !p) return e;
    AIM_CHECK(a && *a && p, "dist launch: ", e.source, " gives a world of ", e.world_size,
              " ranks but MASTER_ADDR and MASTER_PORT are not both set (rank 0's host and a free "
              "port for the rendezvous)");
    e.master_addr = a;
    e.master_port = parse_int("MASTER_PORT", p, 1, 65535);
  }
  return e;
}

void require_rendezvous(const LaunchEnv& e, const std::string& who) {
  AIM_CHECK(e.world_size == 1 || (!e.master_addr.empty() && e.master_port > 0),
            "dist launch: ", who, " needs the TCP rendezvous, but ", e.source, " gives a world of ",
            e.world_size,
            " ranks and MASTER_ADDR and MASTER_PORT are not both set (rank 0's host and a free "
            "port for the rendezvous; mpirun -x MASTER_ADDR=... -x MASTER_PORT=...)");
}

LaunchEnv detect_launch_env() {
  return detect_launch_env([](const char* n) { return std::getenv(n); });
}

// ---- rendezvous ----------------------------------------------------------------------------

namespace {

constexpr uint32_t kMagic = 0x524d4941;  // "AIMR"
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxPayload = uint64_t(1) << 20;

struct Header {
  uint32_t magic, version;
  int32_t rank, world;
  uint64_t n;
};

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    reset();
    fd = o.fd;
    o.fd = -1;
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

int ms_left(Deadline d) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - SteadyClock::now());
  return left.count() <= 0 ? 0 : int(std::min<int64_t>(left.count(), 1 << 30));
}

void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL, 0);
  AIM_CHECK(fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0,
            "dist rendezvous: fcntl(O_NONBLOCK) failed: ", std::strerror(errno));
}

// Waits for `events` on fd until the deadline; false on timeout.
bool wait_fd(int fd, short events, Deadline d) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms_left(d));
    if (r > 0) return true;
    if (r == 0) return false;
    AIM_CHECK(errno == EINTR, "dist rendezvous: poll failed: ", std::strerror(errno));
  }
}

// Sends/receives exactly n bytes before the deadline; `what` names the peer in errors.
void send_all(int fd, const void* data, size_t n, Deadline d, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    AIM_CHECK(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR),
              "dist rendezvous: sending to ", what, " failed: ", std::strerror(errno));
    AIM_CHECK(wait_fd(fd, POLLOUT, d), "dist rendezvous: sending to ", what, " timed out");
  }
}

void recv_all(int fd, void* data, size_t n, Deadline d, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    AIM_CHECK(k != 0, "dist rendezvous: ", what, " closed the connection");
    AIM_CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR,
              "dist rendezvous: reading ", "from ", what, " failed: ", std::strerror(errno));
    AIM_CHECK(wait_fd(fd, POLLIN, d), "dist rendezvous: reading from ", what, " timed out");
  }
}

void send_blob(int fd, const std::string& s, Deadline d, const std::string& what) {
  const uint64_t n = s.size();
  send_all(fd, &n, sizeof n, d, what);
  send_all(fd, s.data(), s.size(), d, what);
}

std::string recv_blob(int fd, Deadline d, const std::string& what) {
  uint64_t n = 0;
  recv_all(fd, &n, sizeof n, d, what);
  AIM_CHECK(n <= kMaxPayload * 1024, "dist rendezvous: ", what, " announced ", n,
            " bytes: not an aim rendezvous peer?");
  std::string s(static_cast<size_t>(n), '\0');
  recv_all(fd, s.data(), s.size(), d, what);
  return s;
}

std::vector<std::string> serve(int port, int world, const std::string& payload,
                               std::chrono::milliseconds timeout) {
  const Deadline d = SteadyClock::now() + timeout;
  Fd ls(::socket(AF_INET, SOCK_STREAM, 0));
  AIM_CHECK(ls.fd >= 0, "dist rendezvous: rank 0: socket() failed: ", std::strerror(errno));
  const int one = 1;
  ::setsockopt(ls.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  AIM_CHECK(::bind(ls.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0,
            "dist rendezvous: rank 0 cannot listen on port ", port,
            " (MASTER_PORT): ", std::strerror(errno));
  AIM_CHECK(::listen(ls.fd, world) == 0, "dist rendezvous: rank 0: listen() on port ", port,
            " failed: ", std::strerror(errno));
  set_nonblocking(ls.fd);

  std::vector<std::string> payloads(static_cast<size_t>(world));
  std::vector<Fd> peers(static_cast<size_t>(world));
  payloads[0] = payload;
  int got = 1;
  // On a bad peer, every connected rank is told why before rank 0 throws.
  auto reject = [&](const std::string& msg) {
    const Deadline soon = SteadyClock::now() + std::chrono::milliseconds(200);
    for (Fd& p : peers) {
      if (p.fd < 0) continue;
      try {
        const uint8_t status = 1;
        send_all(p.fd, &status, 1, soon, "a rank");
        send_blob(p.fd, msg, soon, "a rank");
      } catch (const Error&) {
        // best effort: that rank will time out instead
      }
    }
    AIM_FAIL(msg);
  };
  while (got < world) {
    if (!wait_fd(ls.fd, POLLIN, d)) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (peers[size_t(r)].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      reject(str("dist rendezvous: rank 0 waited ", timeout.count(), " ms on port ", port,
                 " for rank(s) ", missing, " of ", world));
    }
    Fd c(::accept(ls.fd, nullptr, nullptr));
    if (c.fd < 0) {
      AIM_CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED,
                "dist rendezvous: rank 0: accept() failed: ", std::strerror(errno));
      continue;
    }
    set_nonblocking(c.fd);
    Header h{};
    recv_all(c.fd, &h, sizeof h, d, "a connecting rank");
    std::string bad;
    if (h.magic != kMagic || h.version != kVersion)
      bad = "a peer that is not an aim rendezvous (of this version) connected to port " +
            std::to_string(port);
    else if (h.world != world)
      bad = str("rank ", h.rank, " has a world of ", h.world, " ranks, rank 0 has ", world);
    else if (h.rank <= 0 || h.rank >= world)
      bad = str("a peer claims rank ", h.rank, ", expected 1..", world - 1);
    else if (peers[size_t(h.rank)].fd >= 0)
      bad = str("two processes claim rank ", h.rank);
    else if (h.n > kMaxPayload)
      bad = str("rank ", h.rank, " sends ", h.n, " bytes, more than ", kMaxPayload);
    if (!bad.empty()) {
      peers[0] = std::move(c);  // slot 0 is rank 0 itself: unused, so the offender is told too
      reject("dist rendezvous: " + bad);
    }
    std::string& p = payloads[size_t(h.rank)];
    p.resize(size_t(h.n));
    recv_all(c.fd, p.data(), p.size(), d, "rank " + std::to_string(h.rank));
    peers[size_t(h.rank)] = std::move(c);
    ++got;
  }
  for (int r = 1; r < world; ++r) {
    const std::string what = "rank " + std::to_string(r);
    const uint8_t status = 0;
    send_all(peers[size_t(r)].fd, &status, 1, d, what);
    for (const std::string& p : payloads) send_blob(peers[size_t(r)].fd, p, d, what);
  }
  return payloads;
}

std::vector<std::string> join(const std::string& addr, int port, int rank, int world,
                              const std::string& payload, std::chrono::milliseconds timeout) {
  const Deadline d = SteadyClock::now() + timeout;
  const std::string where = addr + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
  AIM_CHECK(gai == 0 && res, "dist rendezvous: rank ", rank, " cannot resolve MASTER_ADDR '", addr,
            "': ", ::gai_strerror(gai));
  sockaddr_in target{};
  std::memcpy(&target, res->ai_addr, sizeof target);
  ::freeaddrinfo(res);

  Fd s;
  std::string last_error = "no attempt";
  for (;;) {
    Fd c(::socket(AF_INET, SOCK_STREAM, 0));
    AIM_CHECK(c.fd >= 0, "dist rendezvous: rank ", rank,
              ": socket() failed: ", std::strerror(errno));
    set_nonblocking(c.fd);
    int rc = ::connect(c.fd, reinterpret_cast<sockaddr*>(&target), sizeof target);
    if (rc != 0 && errno == EINPROGRESS) {
      if (wait_fd(c.fd, POLLOUT, d)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      s = std::move(c);
      break;
    }
    last_error = std::strerror(errno);
    AIM_CHECK(ms_left(d) > 0, "dist rendezvous: rank ", rank, " could not connect to ", where,
              " within ", timeout.count(), " ms (", last_error,
              "): is rank 0 running, and is MASTER_ADDR/MASTER_PORT right?");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, ms_left(d))));
  }
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string peer = "rank 0 at " + where;
  const Header h{kMagic, kVersion, int32_t(rank), int32_t(world), uint64_t(payload.size())};
  send_all(s.fd, &h, sizeof h, d, peer);
  send_all(s.fd, payload.data(), payload.size(), d, peer);
  uint8_t status = 0;
  recv_all(s.fd, &status, 1, d, peer + " (waiting for all " + std::to_string(world) + " ranks)");
  if (status != 0) AIM_FAIL(recv_blob(s.fd, d, peer), " (reported by rank 0 to rank ", rank, ")");
  std::vector<std::string> payloads;
  for (int r = 0; r < world; ++r) payloads.push_back(recv_blob(s.fd, d, peer));
  return payloads;
}

}  // namespace

std::vector<std::string> tcp_all_gather(const std::string& addr, int port, int rank, int world,
                                        const std::string& payload,
                                        std::chrono::milliseconds timeout) {
  AIM_CHECK(world >= 1 && rank >= 0 && rank < world, "dist rendezvous: rank ", rank,
            " is not in a world of ", world);
  AIM_CHECK(port >= 1 && port <= 65535, "dist rendezvous: port ", port, " is not in 1..65535");
  AIM_CHECK(timeout.count() > 0, "dist rendezvous: timeout must be positive");
  AIM_CHECK(payload.size() <= kMaxPayload, "dist rendezvous: payload of ", payload.size(),
            " bytes is larger than ", kMaxPayload);
  if (world == 1) return {payload};
  return rank == 0 ? serve(port, world, payload, timeout)
                   : join(addr, port, rank, world, payload, timeout);
}

}  // namespace aim::dist
