// convstatectl: the operator's command line for convstate.
//
//   convstatectl [flags] COMMAND [ARGS]
//
// Commands: list, show CONV, items CONV [--from N] [--limit N], view CONV,
// inspect CONV, compact CONV [--mode M] [--instructions TEXT] [--through N]
// [--dry-run], apply CONV PROPOSAL [--text TEXT], revert CONV CHUNK,
// policy CONV [--instructions TEXT] [--keep PATTERN]... [--keep-budget F]
// [--clear], summaries CONV [--all], expand CONV CHUNK, history CONV,
// export CONV, import FILE [--as ID], fork CONV [--at N] [--as ID],
// forks CONV, rewind CONV N [--as ID], report CONV, health. See kUsageText.
//
// Exit codes: 0 success; a gRPC status code (1 to 16, e.g. 5 NOT_FOUND,
// 7 PERMISSION_DENIED, 14 UNAVAILABLE, 16 UNAUTHENTICATED) when the
// service refused or could not be reached; 64 for a usage error; 66 when
// an input file cannot be read or parsed.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/convstatectl/client.h"
#include "tools/convstatectl/render.h"
#include "tools/convstatectl/report.h"

namespace convstate::ctl {
namespace {

constexpr int kUsage = 64;
constexpr int kNoInput = 66;

const char kUsageText[] = R"(convstatectl: the operator's command line for convstate

usage: convstatectl [flags] COMMAND [ARGS]

commands:
  list                          the tenant's conversations
  show CONV                     a conversation and its counts
  items CONV [--from N] [--limit N]
                                the stored items from sequence N (default 1), at most N (default 50)
  view CONV                     the window BuildContext returns now: each entry, and a bar per section
  inspect CONV                  the token breakdown, band, and what the next compaction would do
  compact CONV [--mode auto|prune|summarize|truncate] [--instructions TEXT] [--through N]
               [--dry-run]      compact now (--through N: summarize exactly through item N;
                                --dry-run: store nothing, print the proposal to apply)
  apply CONV PROPOSAL [--text TEXT]
                                apply a dry run's proposal, with TEXT as the summary if given
  revert CONV CHUNK             undo the compaction that wrote CHUNK (the newest summary)
  policy CONV [--instructions TEXT] [--keep PATTERN]... [--keep-budget F] [--clear]
                                the conversation's compaction policy; with flags, replace it:
                                instructions for every summary, RE2 patterns of items kept
                                verbatim, their share of the window (--clear: none)
  summaries CONV [--all]        the active summary chunks (--all: superseded ones too)
  expand CONV CHUNK             a chunk and the items it summarizes
  history CONV                  the compaction audit rows, oldest first
  export CONV                   the conversation and its items as JSON lines, on stdout
  import FILE [--as ID]         create a conversation from an export (under ID if given) and
                                append its items turn by turn
  fork CONV [--at N] [--as ID]  a new conversation from CONV's items 1..N (default: all) and the
                                window CONV had when N was its last item (under ID if given)
  forks CONV                    the conversations forked from CONV
  rewind CONV N [--as ID]       take CONV back to its item N, with the window it had there; what
                                came after lives on in a fork (named ID if given)
  report CONV                   a self-contained HTML report, on stdout
  health                        the service's health (grpc.health.v1)

flags:
  --address=HOST:PORT   the service (default $CONVSTATE_ADDRESS, else localhost:50051)
  --token=TOKEN         a bearer token (default $CONVSTATE_TOKEN)
  --cacert=FILE         TLS: the CA of the server's certificate (turns TLS on)
  --cert=FILE --key=FILE
                        mutual TLS: the client certificate and its key
  --tenant=ID           the tenant (default: the one the service takes, the credential's)
  --timeout_ms=N        per call (default 30000)
  --json                machine output: each answer as JSON (the proto3 mapping, as grpcurl
                        prints it), one per line

exit codes: 0 success; the gRPC status code (1 to 16) when a call fails, e.g. 5 NOT_FOUND,
7 PERMISSION_DENIED, 14 UNAVAILABLE, 16 UNAUTHENTICATED; 64 usage error; 66 unreadable input
)";

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  // --keep, which may be given more than once.
  std::vector<std::string> keep;
  bool json = false;
};

int UsageError(const std::string& message) {
  std::fprintf(stderr, "convstatectl: %s\n(convstatectl --help for usage)\n", message.c_str());
  return kUsage;
}

// The CHUNK argument of revert and expand: a chunk id, a positive number.
constexpr char kChunkUsage[] = "CHUNK is a chunk id (a positive number)";
bool ChunkId(const std::string& arg, int64_t& chunk) {
  return absl::SimpleAtoi(arg, &chunk) && chunk > 0;
}

// Flags are --name=value or --name value, anywhere on the line.
bool Parse(int argc, char** argv, Args* args, std::string* error) {
  static const std::map<std::string, bool> kKnown = {
      {"address", true}, {"token", true},        {"cacert", true}, {"cert", true},
      {"key", true},     {"tenant", true},       {"timeout_ms", true}, {"json", false},
      {"from", true},    {"limit", true},        {"mode", true},   {"instructions", true},
      {"all", false},    {"as", true},           {"help", false},  {"through", true},
      {"dry-run", false}, {"text", true},        {"keep", true},   {"keep-budget", true},
      {"clear", false},  {"at", true}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!absl::StartsWith(a, "--")) {
      args->positional.push_back(a);
      continue;
    }
    a = a.substr(2);
    std::string value;
    const size_t eq = a.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto known = kKnown.find(a);
    if (known == kKnown.end()) {
      *error = absl::StrCat("unknown flag --", a);
      return false;
    }
    if (known->second && !has_value) {
      if (i + 1 >= argc) {
        *error = absl::StrCat("--", a, " needs a value");
        return false;
      }
      value = argv[++i];
    }
    if (a == "json") args->json = true;
    if (a == "keep") args->keep.push_back(value);
    args->flags[a] = value;
  }
  return true;
}

std::string Flag(const Args& args, const std::string& name, const std::string& fallback = "") {
  auto it = args.flags.find(name);
  return it == args.flags.end() ? fallback : it->second;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

// A failed call: its status on stderr, its code as the exit code.
int Failed(const std::string& what, const grpc::Status& s) {
  // gRPC's codes are Abseil's, number for number.
  std::string code = absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()));
  if (code.empty()) code = absl::StrCat("code ", s.error_code());
  std::fprintf(stderr, "convstatectl: %s: %s: %s\n", what.c_str(), code.c_str(),
               s.error_message().c_str());
  return static_cast<int>(s.error_code());
}

class Commands {
 public:
  Commands(Args args, std::unique_ptr<Client> client, std::string tenant)
      : args_(std::move(args)), client_(std::move(client)), tenant_(std::move(tenant)) {}

  int Run() {
    const std::string& command = args_.positional[0];
    if (command == "list") return List();
    if (command == "health") return Health();
    if (command == "import") return Import();
    if (args_.positional.size() < 2) return UsageError(absl::StrCat(command, " needs CONV"));
    conv_ = args_.positional[1];
    if (command == "show") return Show();
    if (command == "items") return Items();
    if (command == "view") return View();
    if (command == "inspect") return Inspect();
    if (command == "compact") return Compact();
    if (command == "apply") return Apply();
    if (command == "revert") return Revert();
    if (command == "policy") return Policy();
    if (command == "summaries") return Summaries();
    if (command == "expand") return Expand();
    if (command == "history") return History();
    if (command == "export") return Export();
    if (command == "report") return Report();
    if (command == "fork") return Fork();
    if (command == "forks") return Forks();
    if (command == "rewind") return Rewind();
    return UsageError(absl::StrCat("unknown command '", command, "'"));
  }

 private:
  template <typename Request>
  Request Named() const {
    Request r;
    r.set_tenant_id(tenant_);
    r.set_conversation_id(conv_);
    return r;
  }

  int List() {
    v1::ListConversationsRequest req;
    req.set_tenant_id(tenant_);
    req.set_page_size(100);
    std::vector<std::vector<std::string>> rows = {
        {"conversation", "model", "items", "version", "compactions", "updated"}};
    do {
      v1::ListConversationsResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ListConversations(ctx.get(), req, &resp);
      if (!s.ok()) return Failed("list", s);
      for (const v1::Conversation& c : resp.conversations()) {
        if (args_.json) {
          std::cout << Json(c) << "\n";
          continue;
        }
        rows.push_back({c.conversation_id(), c.model(), absl::StrCat(c.item_count()),
                        absl::StrCat(c.version()), absl::StrCat(c.compaction_version()),
                        Time(c.update_time())});
      }
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    if (!args_.json) std::cout << Table(rows);
    return 0;
  }

  static std::string Time(const google::protobuf::Timestamp& t) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(t.seconds()),
                            absl::UTCTimeZone());
  }

  int Show() {
    v1::Conversation c;
    auto ctx = client_->Context();
    grpc::Status s =
        client_->service().GetConversation(ctx.get(), Named<v1::GetConversationRequest>(), &c);
    if (!s.ok()) return Failed("show", s);
    if (args_.json) {
      std::cout << Json(c) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows = {
        {"conversation", c.conversation_id()},
        {"tenant", c.tenant_id()},
        {"model", c.model()},
        {"items", absl::StrCat(c.item_count())},
        {"last sequence", absl::StrCat(c.last_sequence())},
        {"turns", absl::StrCat(c.last_turn_index())},
        {"version", absl::StrCat(c.version())},
        {"compaction version", absl::StrCat(c.compaction_version())},
        {"created", Time(c.create_time())},
        {"updated", Time(c.update_time())},
        {"system prompt", Preview(c.system_prompt(), 80)},
        {"pinned instructions", Preview(c.pinned_instructions(), 80)}};
    if (!c.continued_from().empty()) rows.push_back({"continued from", c.continued_from()});
    if (c.has_forked_from()) {
      rows.push_back({"forked from", absl::StrCat(c.forked_from().conversation_id(), " at item ",
                                                  c.forked_from().sequence())});
    }
    for (const auto& [k, v] : c.metadata()) rows.push_back({"metadata " + k, Preview(v, 80)});
    std::cout << Table(rows);
    return 0;
  }

  // Every stored item from `from` on, at most `limit` (0: all), page by page.
  grpc::Status ReadItems(int64_t from, int64_t limit, std::vector<v1::Item>* out) {
    v1::ListItemsRequest req = Named<v1::ListItemsRequest>();
    req.set_page_size(500);
    do {
      v1::ListItemsResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ListItems(ctx.get(), req, &resp);
      if (!s.ok()) return s;
      for (const v1::Item& it : resp.items()) {
        if (it.sequence() < from) continue;
        if (limit > 0 && static_cast<int64_t>(out->size()) >= limit) return grpc::Status::OK;
        out->push_back(it);
      }
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return grpc::Status::OK;
  }

  int Items() {
    int64_t from = 1, limit = 50;
    if (!absl::SimpleAtoi(Flag(args_, "from", "1"), &from) ||
        !absl::SimpleAtoi(Flag(args_, "limit", "50"), &limit) || limit < 0) {
      return UsageError("--from and --limit take whole numbers");
    }
    std::vector<v1::Item> items;
    grpc::Status s = ReadItems(from, limit, &items);
    if (!s.ok()) return Failed("items", s);
    if (args_.json) {
      for (const v1::Item& it : items) std::cout << Json(it) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows = {
        {"seq", "turn", "role", "kind", "tokens", "flags", "content"}};
    for (const v1::Item& it : items) {
      std::string flags;
      if (it.pinned()) flags += "pinned ";
      if (it.redacted()) flags += "redacted ";
      if (it.summary_chunk_id() > 0) flags += absl::StrCat("chunk ", it.summary_chunk_id());
      rows.push_back({absl::StrCat(it.sequence()), absl::StrCat(it.turn_index()),
                      RoleName(it.role()), KindName(it.kind()), absl::StrCat(it.token_count()),
                      flags, Preview(it.content(), 70)});
    }
    std::cout << Table(rows);
    return 0;
  }

  grpc::Status Build(v1::BuildContextResponse* view) {
    auto ctx = client_->Context();
    return client_->service().BuildContext(ctx.get(), Named<v1::BuildContextRequest>(), view);
  }

  grpc::Status InspectNow(v1::InspectContextResponse* out) {
    auto ctx = client_->Context();
    return client_->service().InspectContext(ctx.get(), Named<v1::InspectContextRequest>(), out);
  }

  int View() {
    v1::BuildContextResponse view;
    grpc::Status s = Build(&view);
    if (!s.ok()) return Failed("view", s);
    if (args_.json) {
      std::cout << Json(view) << "\n";
      return 0;
    }
    std::cout << ViewTable(view) << "\n"
              << SectionBars(view.tokens()) << "\nstatus "
              << StatusName(view.context_status()) << ", version " << view.version()
              << ", compaction version " << view.compaction_version() << "\n";
    return 0;
  }

  int Inspect() {
    v1::InspectContextResponse out;
    grpc::Status s = InspectNow(&out);
    if (!s.ok()) return Failed("inspect", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
      return 0;
    }
    std::cout << SectionBars(out.tokens()) << "\nband " << BandName(out.band()) << " (soft "
              << out.thresholds().soft() << ", hard " << out.thresholds().hard()
              << ", emergency " << out.thresholds().emergency() << " tokens), status "
              << StatusName(out.context_status()) << "\n";
    if (out.planned_actions_size() == 0) {
      std::cout << "next compaction: nothing to do\n";
    } else {
      std::cout << "next compaction:\n";
      for (const std::string& a : out.planned_actions()) std::cout << "  " << a << "\n";
      std::cout << "projected total " << out.projected_total() << "\n";
    }
    return 0;
  }

  int Compact() {
    v1::CompactRequest req = Named<v1::CompactRequest>();
    static const std::map<std::string, v1::CompactRequest::Mode> kModes = {
        {"auto", v1::CompactRequest::MODE_AUTO},
        {"prune", v1::CompactRequest::MODE_PRUNE_ONLY},
        {"summarize", v1::CompactRequest::MODE_SUMMARIZE},
        {"truncate", v1::CompactRequest::MODE_TRUNCATE}};
    auto mode = kModes.find(Flag(args_, "mode", "auto"));
    if (mode == kModes.end()) return UsageError("--mode: auto, prune, summarize or truncate");
    req.set_mode(mode->second);
    req.set_instructions(Flag(args_, "instructions"));
    req.set_dry_run(args_.flags.count("dry-run") > 0);
    if (args_.flags.count("through") > 0) {
      int64_t through = 0;
      if (!absl::SimpleAtoi(Flag(args_, "through"), &through) || through <= 0) {
        return UsageError("--through: an item's sequence (a positive number)");
      }
      req.set_through_sequence(through);
    }
    v1::CompactResponse out;
    auto ctx = client_->Context();
    grpc::Status s = client_->service().Compact(ctx.get(), req, &out);
    if (!s.ok()) return Failed("compact", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
      return 0;
    }
    if (req.dry_run()) return PrintProposal(out);
    std::cout << "compacted: " << out.tokens_before() << " -> " << out.tokens_after()
              << " tokens, status " << StatusName(out.context_status()) << ", compaction version "
              << out.compaction_version();
    if (out.summary_chunk_id() > 0) std::cout << ", new chunk " << out.summary_chunk_id();
    std::cout << "\n";
    return 0;
  }

  int PrintProposal(const v1::CompactResponse& out) {
    for (const std::string& step : out.not_done()) std::cout << "not done: " << step << "\n";
    if (!out.has_proposal()) {
      std::cout << "nothing to propose\n";
      return 0;
    }
    const v1::CompactionProposal& p = out.proposal();
    std::cout << "proposal " << p.proposal_id() << ": summarize items " << p.from_sequence()
              << "-" << p.through_sequence() << ", " << p.before().total() << " -> "
              << p.after().total() << " tokens, recall " << absl::StrFormat("%.2f", p.recall())
              << ", " << p.facts_size() << " facts kept, " << p.lost_facts_size()
              << " lost, expires "
              << absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                  absl::FromUnixSeconds(p.expire_time().seconds()),
                                  absl::UTCTimeZone())
              << "\n";
    for (const v1::LedgerFact& f : p.lost_facts()) {
      std::cout << "  lost #" << f.sequence() << ": " << Preview(f.text(), 70) << "\n";
    }
    std::cout << p.summary_text() << "\n";
    std::cout << "apply with: convstatectl apply " << conv_ << " " << p.proposal_id()
              << " [--text TEXT]\n";
    return 0;
  }

  int Apply() {
    if (args_.positional.size() < 3) return UsageError("apply needs CONV and PROPOSAL");
    v1::ApplyCompactionRequest req = Named<v1::ApplyCompactionRequest>();
    req.set_proposal_id(args_.positional[2]);
    if (args_.flags.count("text") > 0) req.set_summary_text(Flag(args_, "text"));
    v1::ApplyCompactionResponse out;
    auto ctx = client_->Context();
    grpc::Status s = client_->service().ApplyCompaction(ctx.get(), req, &out);
    if (!s.ok()) return Failed("apply", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
      return 0;
    }
    std::cout << (out.replayed() ? "applied before: " : "applied: ") << "chunk "
              << out.summary_chunk_id() << (out.edited() ? " (your text)" : "") << ", "
              << out.tokens_before() << " -> " << out.tokens_after() << " tokens, recall "
              << absl::StrFormat("%.2f", out.recall()) << ", " << out.lost_facts_size()
              << " facts lost, compaction version " << out.compaction_version() << "\n";
    return 0;
  }

  int Fork() {
    v1::ForkConversationRequest req;
    req.set_tenant_id(tenant_);
    req.set_source_conversation_id(conv_);
    req.set_conversation_id(Flag(args_, "as"));
    int64_t at = 0;
    if (!absl::SimpleAtoi(Flag(args_, "at", "0"), &at) || at < 0) {
      return UsageError("--at takes an item's sequence (a whole number; 0: the last item)");
    }
    req.set_at_sequence(at);
    v1::Conversation fork;
    auto ctx = client_->Context();
    grpc::Status s = client_->service().ForkConversation(ctx.get(), req, &fork);
    if (!s.ok()) return Failed("fork", s);
    if (args_.json) {
      std::cout << Json(fork) << "\n";
      return 0;
    }
    std::cout << "forked " << conv_ << " at item " << fork.forked_from().sequence() << " into "
              << fork.conversation_id() << " (" << fork.item_count() << " items, version "
              << fork.version() << ")\n";
    return 0;
  }

  int Rewind() {
    if (args_.positional.size() < 3) return UsageError("rewind needs CONV and N");
    int64_t to = 0;
    if (!absl::SimpleAtoi(args_.positional[2], &to) || to < 0) {
      return UsageError("N is an item's sequence (a whole number; 0: before the first)");
    }
    v1::RewindConversationRequest req = Named<v1::RewindConversationRequest>();
    req.set_to_sequence(to);
    req.set_abandoned_conversation_id(Flag(args_, "as"));
    v1::RewindConversationResponse out;
    auto ctx = client_->Context();
    grpc::Status s = client_->service().RewindConversation(ctx.get(), req, &out);
    if (!s.ok()) return Failed("rewind", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
      return 0;
    }
    std::cout << "rewound " << conv_ << " to item " << out.conversation().last_sequence()
              << " (version " << out.conversation().version() << "); items "
              << out.conversation().last_sequence() + 1 << "-"
              << out.abandoned().last_sequence() << " live on in "
              << out.abandoned().conversation_id() << "\n";
    return 0;
  }

  int Forks() {
    v1::ListForksRequest req = Named<v1::ListForksRequest>();
    req.set_page_size(100);
    std::vector<std::vector<std::string>> rows = {{"fork", "at item", "items", "model", "updated"}};
    do {
      v1::ListForksResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ListForks(ctx.get(), req, &resp);
      if (!s.ok()) return Failed("forks", s);
      for (const v1::Conversation& c : resp.forks()) {
        if (args_.json) {
          std::cout << Json(c) << "\n";
          continue;
        }
        rows.push_back({c.conversation_id(), absl::StrCat(c.forked_from().sequence()),
                        absl::StrCat(c.item_count()), c.model(), Time(c.update_time())});
      }
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    if (!args_.json) std::cout << Table(rows);
    return 0;
  }

  int Revert() {
    if (args_.positional.size() < 3) return UsageError("revert needs CONV and CHUNK");
    int64_t chunk = 0;
    if (!ChunkId(args_.positional[2], chunk)) return UsageError(kChunkUsage);
    v1::RevertCompactionRequest req = Named<v1::RevertCompactionRequest>();
    req.set_chunk_id(chunk);
    v1::RevertCompactionResponse out;
    auto ctx = client_->Context();
    grpc::Status s = client_->service().RevertCompaction(ctx.get(), req, &out);
    if (!s.ok()) return Failed("revert", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
      return 0;
    }
    std::cout << "reverted chunk " << out.chunk().chunk_id() << " (items "
              << out.chunk().from_sequence() << "-" << out.chunk().through_sequence()
              << "): summaries now end at " << out.summarized_through() << ", compaction version "
              << out.compaction_version() << "\n";
    return 0;
  }

  int Policy() {
    const bool set = args_.flags.count("instructions") + args_.flags.count("clear") +
                         args_.flags.count("keep-budget") + args_.keep.size() >
                     0;
    v1::Conversation conversation;
    auto ctx = client_->Context();
    grpc::Status s;
    if (set) {
      v1::UpdateConversationRequest req = Named<v1::UpdateConversationRequest>();
      v1::CompactionPolicy* policy = req.mutable_compaction_policy();
      if (args_.flags.count("clear") == 0) {
        policy->set_instructions(Flag(args_, "instructions"));
        for (const std::string& pattern : args_.keep) policy->add_keep()->set_pattern(pattern);
        if (args_.flags.count("keep-budget") > 0) {
          double budget = 0;
          if (!absl::SimpleAtod(Flag(args_, "keep-budget"), &budget)) {
            return UsageError("--keep-budget: a fraction of the window, e.g. 0.2");
          }
          policy->set_keep_budget_fraction(budget);
        }
      }
      s = client_->service().UpdateConversation(ctx.get(), req, &conversation);
    } else {
      v1::GetConversationRequest req = Named<v1::GetConversationRequest>();
      s = client_->service().GetConversation(ctx.get(), req, &conversation);
    }
    if (!s.ok()) return Failed("policy", s);
    const v1::CompactionPolicy& policy = conversation.compaction_policy();
    if (args_.json) {
      std::cout << Json(policy) << "\n";
      return 0;
    }
    std::cout << "instructions: "
              << (policy.instructions().empty() ? "(none)" : policy.instructions()) << "\n";
    for (const v1::KeepRule& rule : policy.keep()) std::cout << "keep: " << rule.pattern() << "\n";
    if (policy.has_keep_budget_fraction()) {
      std::cout << "keep budget: " << policy.keep_budget_fraction() << " of the window\n";
    }
    return 0;
  }

  // Every chunk, page after page.
  grpc::Status Chunks(bool all, std::vector<v1::SummaryChunk>* out) {
    v1::ListSummariesRequest req = Named<v1::ListSummariesRequest>();
    req.set_include_superseded(all);
    out->clear();
    do {
      v1::ListSummariesResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ListSummaries(ctx.get(), req, &resp);
      if (!s.ok()) return s;
      out->insert(out->end(), resp.chunks().begin(), resp.chunks().end());
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return grpc::Status::OK;
  }

  int Summaries() {
    std::vector<v1::SummaryChunk> chunks;
    grpc::Status s = Chunks(args_.flags.count("all") > 0, &chunks);
    if (!s.ok()) return Failed("summaries", s);
    if (args_.json) {
      for (const v1::SummaryChunk& c : chunks) std::cout << Json(c) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows = {
        {"chunk", "items", "tokens", "recall", "facts", "model", "state", "text"}};
    for (const v1::SummaryChunk& c : chunks) {
      rows.push_back({absl::StrCat(c.chunk_id()),
                      absl::StrCat(c.from_sequence(), "-", c.through_sequence()),
                      absl::StrCat(c.token_count()),
                      c.has_recall() ? absl::StrFormat("%.2f", c.recall()) : std::string("-"),
                      absl::StrCat(c.facts_size(), "+", c.constraints_size()),
                      c.summarizer_model(),
                      c.reverted()               ? std::string("reverted")
                      : c.superseded_by() == 0     ? std::string("active")
                                                   : absl::StrCat("superseded by ", c.superseded_by()),
                      Preview(c.text(), 50)});
    }
    std::cout << Table(rows);
    return 0;
  }

  int Expand() {
    if (args_.positional.size() < 3) return UsageError("expand needs CONV and CHUNK");
    int64_t chunk = 0;
    if (!ChunkId(args_.positional[2], chunk)) return UsageError(kChunkUsage);
    v1::ExpandSummaryRequest req = Named<v1::ExpandSummaryRequest>();
    req.set_chunk_id(chunk);
    req.set_page_size(500);
    v1::SummaryChunk head;
    std::vector<v1::Item> items;
    do {
      v1::ExpandSummaryResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ExpandSummary(ctx.get(), req, &resp);
      if (!s.ok()) return Failed("expand", s);
      head = resp.chunk();
      items.insert(items.end(), resp.items().begin(), resp.items().end());
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    if (args_.json) {
      std::cout << Json(head) << "\n";
      for (const v1::Item& it : items) std::cout << Json(it) << "\n";
      return 0;
    }
    std::cout << "chunk " << head.chunk_id() << ": items " << head.from_sequence() << "-"
              << head.through_sequence() << ", " << head.token_count() << " tokens, by "
              << head.summarizer_model() << "\n\n"
              << head.text() << "\n\n";
    std::vector<std::vector<std::string>> rows = {{"seq", "role", "kind", "tokens", "content"}};
    for (const v1::Item& it : items) {
      rows.push_back({absl::StrCat(it.sequence()), RoleName(it.role()), KindName(it.kind()),
                      absl::StrCat(it.token_count()), Preview(it.content(), 80)});
    }
    std::cout << Table(rows);
    return 0;
  }

  // The whole audit trail, page after page.
  grpc::Status Events(std::vector<v1::CompactionEvent>* out) {
    v1::ListCompactionEventsRequest req = Named<v1::ListCompactionEventsRequest>();
    out->clear();
    do {
      v1::ListCompactionEventsResponse resp;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().ListCompactionEvents(ctx.get(), req, &resp);
      if (!s.ok()) return s;
      out->insert(out->end(), resp.events().begin(), resp.events().end());
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return grpc::Status::OK;
  }

  int History() {
    std::vector<v1::CompactionEvent> events;
    grpc::Status s = Events(&events);
    if (!s.ok()) return Failed("history", s);
    if (args_.json) {
      for (const v1::CompactionEvent& e : events) std::cout << Json(e) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows = {
        {"event", "time", "what", "tier", "before", "after", "detail"}};
    for (const v1::CompactionEvent& e : events) {
      rows.push_back({absl::StrCat(e.event_id()), Time(e.create_time()), e.event(),
                      e.tier().empty() ? "-" : e.tier(), absl::StrCat(e.tokens_before()),
                      absl::StrCat(e.tokens_after()), Preview(e.detail_json(), 60)});
    }
    std::cout << Table(rows);
    return 0;
  }

  // Line 1: {"conversation": ...}; then one {"item": ...} per stored item.
  int Export() {
    v1::Conversation c;
    {
      auto ctx = client_->Context();
      grpc::Status s =
          client_->service().GetConversation(ctx.get(), Named<v1::GetConversationRequest>(), &c);
      if (!s.ok()) return Failed("export", s);
    }
    std::vector<v1::Item> items;
    grpc::Status s = ReadItems(1, 0, &items);
    if (!s.ok()) return Failed("export", s);
    std::cout << "{\"conversation\":" << Json(c) << "}\n";
    for (const v1::Item& it : items) std::cout << "{\"item\":" << Json(it) << "}\n";
    return 0;
  }

  // The value of a line's one key ({"conversation": {...}}), as JSON text;
  // spaces around the key's colon and the closing brace are allowed.
  static bool Unwrap(std::string line, const std::string& key, std::string* inner) {
    auto trim = [](std::string& s) {
      while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
      size_t lead = 0;
      while (lead < s.size() && (s[lead] == ' ' || s[lead] == '\t')) ++lead;
      s.erase(0, lead);
    };
    trim(line);
    const std::string head = "{\"" + key + "\"";
    if (!absl::StartsWith(line, head) || line.back() != '}') return false;
    std::string rest = line.substr(head.size(), line.size() - head.size() - 1);
    trim(rest);
    if (rest.empty() || rest[0] != ':') return false;
    *inner = rest.substr(1);
    return true;
  }

  int Import() {
    if (args_.positional.size() < 2) return UsageError("import needs FILE");
    const std::string path = args_.positional[1];
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "convstatectl: cannot read %s\n", path.c_str());
      return kNoInput;
    }
    std::string line, inner;
    v1::Conversation c;
    if (!std::getline(in, line) || !Unwrap(line, "conversation", &inner)) {
      std::fprintf(stderr, "convstatectl: %s: line 1 is not {\"conversation\": ...}\n",
                   path.c_str());
      return kNoInput;
    }
    if (auto parsed = google::protobuf::util::JsonStringToMessage(inner, &c); !parsed.ok()) {
      std::fprintf(stderr, "convstatectl: %s: line 1: %s\n", path.c_str(),
                   std::string(parsed.message()).c_str());
      return kNoInput;
    }
    std::vector<v1::Item> items;
    for (int n = 2; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      v1::Item it;
      if (!Unwrap(line, "item", &inner)) {
        std::fprintf(stderr, "convstatectl: %s: line %d is not {\"item\": ...}\n", path.c_str(),
                     n);
        return kNoInput;
      }
      if (auto parsed = google::protobuf::util::JsonStringToMessage(inner, &it); !parsed.ok()) {
        std::fprintf(stderr, "convstatectl: %s: line %d: %s\n", path.c_str(), n,
                     std::string(parsed.message()).c_str());
        return kNoInput;
      }
      items.push_back(std::move(it));
    }
    v1::CreateConversationRequest create;
    create.set_tenant_id(tenant_);
    create.set_conversation_id(Flag(args_, "as", c.conversation_id()));
    create.set_model(c.model());
    create.set_system_prompt(c.system_prompt());
    create.set_pinned_instructions(c.pinned_instructions());
    *create.mutable_metadata() = c.metadata();
    *create.mutable_profile_overrides() = c.profile_overrides();
    v1::Conversation created;
    {
      auto ctx = client_->Context();
      grpc::Status s = client_->service().CreateConversation(ctx.get(), create, &created);
      if (!s.ok()) return Failed("import", s);
    }
    // One AppendTurn per stored turn, keyed so that a retry appends nothing
    // twice. Summary markers are the service's own and are not replayed.
    int64_t appended = 0;
    for (size_t i = 0; i < items.size();) {
      v1::AppendTurnRequest req;
      req.set_tenant_id(tenant_);
      req.set_conversation_id(created.conversation_id());
      const int64_t turn = items[i].turn_index();
      req.set_idempotency_key(absl::StrCat("import-turn-", turn, "-from-", items[i].sequence()));
      for (; i < items.size() && items[i].turn_index() == turn; ++i) {
        const v1::Item& it = items[i];
        if (it.kind() == v1::ITEM_KIND_SUMMARY_MARKER) continue;
        v1::NewItem* n = req.add_items();
        n->set_role(it.role());
        n->set_kind(it.kind());
        n->set_content(it.content());
        n->set_tool_name(it.tool_name());
        n->set_tool_call_id(it.tool_call_id());
        n->set_pinned(it.pinned());
        *n->mutable_metadata() = it.metadata();
      }
      if (req.items_size() == 0) continue;
      v1::AppendTurnResponse out;
      auto ctx = client_->Context();
      grpc::Status s = client_->service().AppendTurn(ctx.get(), req, &out);
      if (!s.ok()) return Failed(absl::StrCat("import: turn ", turn), s);
      appended += req.items_size();
    }
    if (args_.json) {
      std::cout << "{\"conversationId\":\"" << created.conversation_id()
                << "\",\"itemsAppended\":" << appended << "}\n";
    } else {
      std::cout << "imported " << created.conversation_id() << ": " << appended << " items\n";
    }
    return 0;
  }

  int Report() {
    ReportData d;
    {
      auto ctx = client_->Context();
      grpc::Status s = client_->service().GetConversation(
          ctx.get(), Named<v1::GetConversationRequest>(), &d.conversation);
      if (!s.ok()) return Failed("report", s);
    }
    grpc::Status s = Build(&d.view);
    if (s.ok()) s = InspectNow(&d.inspect);
    if (s.ok()) s = Chunks(true, &d.chunks);
    if (s.ok()) s = Events(&d.events);
    if (s.ok()) s = ReadItems(1, 0, &d.items);
    if (!s.ok()) return Failed("report", s);
    d.generated_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
    std::cout << RenderReport(d);
    return 0;
  }

  int Health() {
    auto stub = grpc::health::v1::Health::NewStub(client_->channel());
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(args_.positional.size() > 1 ? args_.positional[1] : "");
    grpc::health::v1::HealthCheckResponse out;
    auto ctx = client_->Context();
    grpc::Status s = stub->Check(ctx.get(), req, &out);
    if (!s.ok()) return Failed("health", s);
    if (args_.json) {
      std::cout << Json(out) << "\n";
    } else {
      std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(out.status())
                << "\n";
    }
    // NOT_SERVING is an answer, but not health.
    return out.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 14;
  }

  Args args_;
  std::unique_ptr<Client> client_;
  std::string tenant_;
  std::string conv_;
};

int Main(int argc, char** argv) {
  Args args;
  std::string error;
  if (!Parse(argc, argv, &args, &error)) return UsageError(error);
  if (args.flags.count("help") || args.positional.empty()) {
    std::fputs(kUsageText, args.positional.empty() && !args.flags.count("help") ? stderr : stdout);
    return args.flags.count("help") ? 0 : kUsage;
  }
  ClientOptions options;
  options.address = Flag(args, "address", Env("CONVSTATE_ADDRESS"));
  if (options.address.empty()) options.address = "localhost:50051";
  options.token = Flag(args, "token", Env("CONVSTATE_TOKEN"));
  options.cacert = Flag(args, "cacert");
  options.cert = Flag(args, "cert");
  options.key = Flag(args, "key");
  int64_t timeout_ms = 30000;
  if (!absl::SimpleAtoi(Flag(args, "timeout_ms", "30000"), &timeout_ms) || timeout_ms <= 0) {
    return UsageError("--timeout_ms takes a positive number");
  }
  options.timeout = absl::Milliseconds(timeout_ms);
  auto client = Client::Connect(options);
  if (!client.ok()) {
    if (absl::IsNotFound(client.status())) {
      std::fprintf(stderr, "convstatectl: %s\n", std::string(client.status().message()).c_str());
      return kNoInput;
    }
    return UsageError(std::string(client.status().message()));
  }
  const std::string tenant = Flag(args, "tenant");
  Commands commands(std::move(args), std::move(*client), tenant);
  return commands.Run();
}

}  // namespace
}  // namespace convstate::ctl

int main(int argc, char** argv) { return convstate::ctl::Main(argc, argv); }
