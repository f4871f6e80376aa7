#include "tools/replay_lib.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "convstate/v1/convstate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/common/utf8.h"
#include "tools/rpc/rpc_helpers.h"

namespace convstate::replay {

Item StoredItem(const ReplayItem& r, int64_t sequence) {
  Item item;
  item.sequence = sequence;
  item.turn_index = r.turn;
  item.data.role = r.role == "user"   ? Role::kUser
                   : r.role == "tool" ? Role::kTool
                                      : Role::kAssistant;
  item.data.kind = r.kind == "tool_call"     ? ItemKind::kToolCall
                   : r.kind == "tool_result" ? ItemKind::kToolResult
                                             : ItemKind::kMessage;
  item.data.content = r.content;
  item.data.tool_name = r.tool_name;
  item.data.tool_call_id = r.call_id;
  return item;
}
namespace {

using Json = nlohmann::json;
using convstate::rpc::MakeItem;
using convstate::rpc::SetDeadline;

absl::StatusOr<std::vector<Json>> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Json> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a JSON object"));
    out.push_back(std::move(j));
  }
  return out;
}

v1::Role RoleOf(const std::string& role) {
  if (role == "user") return v1::ROLE_USER;
  if (role == "assistant") return v1::ROLE_ASSISTANT;
  if (role == "tool") return v1::ROLE_TOOL;
  return v1::ROLE_SYSTEM;
}

v1::ItemKind KindOf(const std::string& kind) {
  if (kind == "tool_call") return v1::ITEM_KIND_TOOL_CALL;
  if (kind == "tool_result") return v1::ITEM_KIND_TOOL_RESULT;
  if (kind == "reasoning") return v1::ITEM_KIND_REASONING;
  return v1::ITEM_KIND_MESSAGE;
}

v1::NewItem ToNewItem(const ReplayItem& item) {
  return MakeItem(RoleOf(item.role), KindOf(item.kind), item.content, item.tool_name, item.call_id);
}

std::string Code(const grpc::Status& s) {
  // gRPC's codes are Abseil's, number for number.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()));
  return name.empty() ? absl::StrCat("code ", static_cast<int>(s.error_code())) : name;
}

// Everything the model would read, entry after entry.
std::string ViewText(const v1::BuildContextResponse& view) {
  std::string out;
  for (const v1::ContextEntry& e : view.entries()) absl::StrAppend(&out, e.content(), "\n");
  return out;
}

// The facts planted before `before_turn` (0: all) and how many of them
// `text` holds verbatim.
FactCount CountFacts(const std::vector<Fact>& facts, const std::string& text, int before_turn) {
  FactCount c;
  for (const Fact& f : facts) {
    if (before_turn > 0 && f.turn >= before_turn) continue;
    const bool present = text.find(f.text) != std::string::npos;
    auto& topic = c.by_topic[f.topic];
    ++topic.second;
    topic.first += present;
    if (f.source == "tool") {
      ++c.tool_total;
      c.tool += present;
    } else {
      ++c.message_total;
      c.message += present;
    }
  }
  return c;
}

std::string Placeholder(const v1::Item& item) {
  return absl::StrCat("[output of tool ", item.tool_name(), " (call ", item.tool_call_id(),
                      ") omitted]");
}

// A FIFO window over what `id` stores now (see FifoOf); `ok` false if the
// items could not be listed.
struct FifoWindow {
  std::string text;
  int64_t tokens = 0;
  bool ok = true;
};

FifoWindow Fifo(v1::ConversationState::Stub& stub, const std::string& id,
                const std::string& system_prompt, int64_t budget) {
  FifoWindow w;
  std::vector<v1::Item> stored;
  if (!rpc::ListAllItems(stub, id, stored).ok()) {
    w.ok = false;
    return w;
  }
  w.text = FifoOf(stored, system_prompt, budget, &w.tokens);
  return w;
}


}  // namespace

int FactsIn(const std::vector<Fact>& facts, const std::vector<std::string>& ids,
            const std::string& text) {
  int n = 0;
  for (const std::string& id : ids) {
    for (const Fact& f : facts) {
      if (f.id == id && text.find(f.text) != std::string::npos) ++n;
    }
  }
  return n;
}

std::string FifoOf(const std::vector<v1::Item>& items, const std::string& system_prompt,
                   int64_t budget, int64_t* tokens) {
  std::vector<const v1::Item*> stored;
  for (const v1::Item& item : items) {
    if (item.kind() != v1::ITEM_KIND_SUMMARY_MARKER) stored.push_back(&item);
  }
  constexpr int64_t kPlaceholderTokens = 20;
  const int64_t newest = stored.empty() ? 0 : stored.back()->turn_index();
  std::vector<std::string> kept;
  int64_t used = 0;
  // Turns from the newest back; a turn's items are contiguous.
  size_t end = stored.size();
  while (end > 0) {
    size_t begin = end;
    const int64_t turn = stored[end - 1]->turn_index();
    while (begin > 0 && stored[begin - 1]->turn_index() == turn) --begin;
    int64_t turn_tokens = 0;
    std::string turn_text;
    for (size_t i = begin; i < end; ++i) {
      const v1::Item& item = *stored[i];
      const bool placeholder = item.kind() == v1::ITEM_KIND_TOOL_RESULT && turn != newest;
      turn_tokens += placeholder ? kPlaceholderTokens : item.token_count();
      absl::StrAppend(&turn_text, placeholder ? Placeholder(item) : item.content(), "\n");
    }
    if (used + turn_tokens > budget) break;
    used += turn_tokens;
    kept.push_back(std::move(turn_text));
    end = begin;
  }
  std::string text = system_prompt + "\n";
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) text += *it;
  if (tokens != nullptr) *tokens = used;
  return text;
}

absl::StatusOr<Conversation> Load(const std::string& conversation_path,
                                  const std::string& facts_path, const std::string& probes_path) {
  Conversation c;
  auto lines = ReadLines(conversation_path);
  if (!lines.ok()) return lines.status();
  for (const Json& j : *lines) {
    if (j.contains("system_prompt")) {
      c.system_prompt = j.value("system_prompt", "");
      continue;
    }
    ReplayItem item;
    item.turn = j.value("turn", 0);
    item.role = j.value("role", "");
    item.kind = j.value("kind", "message");
    item.content = j.value("content", "");
    item.tool_name = j.value("tool_name", "");
    item.call_id = j.value("call_id", "");
    if (item.turn <= 0 || (!c.items.empty() && item.turn < c.items.back().turn)) {
      return absl::InvalidArgumentError(
          absl::StrCat(conversation_path, ": turns must be positive and in order"));
    }
    c.items.push_back(std::move(item));
  }
  auto facts = ReadLines(facts_path);
  if (!facts.ok()) return facts.status();
  for (const Json& j : *facts) {
    c.facts.push_back(Fact{j.value("id", ""), j.value("turn", 0), j.value("topic", ""),
                           j.value("source", "message"), j.value("text", "")});
  }
  if (!probes_path.empty()) {
    auto probes = ReadLines(probes_path);
    if (!probes.ok()) return probes.status();
    for (const Json& j : *probes) {
      Probe probe{j.value("kind", ""), j.value("turn", 0), j.value("text", ""), {}};
      if (j.contains("facts") && j["facts"].is_array()) {
        for (const Json& id : j["facts"]) {
          if (id.is_string()) probe.fact_ids.push_back(id.get<std::string>());
        }
      }
      c.probes.push_back(std::move(probe));
    }
  }
  return c;
}

// Counts a failed call in `r`; true if `s` is OK.
bool Note(Result& r, const grpc::Status& s) {
  if (!s.ok()) ++r.errors[Code(s)];
  return s.ok();
}

// Counts a view, and whether it stands at or above the hard band (and why).
void CountView(Result& r, const v1::BuildContextResponse& view) {
  ++r.views;
  if (view.tokens().total() < r.hard_threshold) return;
  ++r.views_over_hard;
  // The reason without its figures, so that alike reasons count together.
  std::string reason = view.band_reason().substr(0, view.band_reason().find_first_of("(:"));
  ++r.over_hard_reasons[reason.empty() ? "(no reason given)" : reason];
}

// Creates the replay's conversation and reads what a FIFO window spends on
// its system prompt (the conversation's own tokenizer's count) and the hard
// threshold, whose room a FIFO window is held to, as a view is.
absl::StatusOr<int64_t> CreateForReplay(v1::ConversationState::Stub& stub, const std::string& id,
                                        const Conversation& conv, const Options& options,
                                        int64_t reserve, Result& r) {
  {
    v1::CreateConversationRequest req;
    req.set_conversation_id(id);
    req.set_model(options.model);
    req.set_system_prompt(conv.system_prompt);
    req.mutable_profile_overrides()->set_context_window(options.window);
    req.mutable_profile_overrides()->set_output_reserve(reserve);
    if (options.recall_budget >= 0) {
      req.mutable_profile_overrides()->set_recall_budget_fraction(options.recall_budget);
    }
    v1::Conversation out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    const grpc::Status s = stub.CreateConversation(&ctx, req, &out);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("CreateConversation: ", s.error_message()));
  }
  int64_t system_tokens = 0;
  v1::InspectContextRequest req;
  req.set_conversation_id(id);
  v1::InspectContextResponse out;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  if (Note(r, stub.InspectContext(&ctx, req, &out))) {
    system_tokens = out.tokens().system();
    r.hard_threshold = out.thresholds().hard();
  }
  if (r.hard_threshold <= 0) r.hard_threshold = options.window;
  return system_tokens;
}

// What the replay ends with: the final view (as the next call would get
// it), the summary chunks written and the audit rows.
void ReadFinalState(v1::ConversationState::Stub& stub, const std::string& id,
                    const Conversation& conv, int turns, const Options& options, Result& r) {
  // The final view, as the next call would get it.
  {
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    v1::BuildContextResponse view;
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(120));
    if (Note(r, stub.BuildContext(&ctx, build, &view))) {
      const std::string text = ViewText(view);
      r.facts = CountFacts(conv.facts, text, turns + 1);
      r.ledger_facts_omitted = view.ledger_facts_omitted();
      const v1::TokenBreakdown& t = view.tokens();
      r.final_sections = {t.system(), t.pinned(), t.summaries(), t.ledger(), t.live()};
      for (const v1::ContextEntry& e : view.entries()) {
        absl::StrAppend(&r.final_view, "### ", v1::Section_Name(e.section()), " ",
                        v1::Role_Name(e.role()), " #", e.sequence(), " (", e.token_count(),
                        " tokens)\n", e.content(), "\n");
      }
      r.views_over_window += view.tokens().total() > options.window;
      CountView(r, view);
      r.views_invalid_utf8 += !IsValidUtf8(text);
      for (Result::Instruction& in : r.instructions) {
        if (turns <= in.turn) continue;
        ++in.views;
        in.in_final_view = text.find(in.text) != std::string::npos;
        in.kept += in.in_final_view;
      }
    }
  }
  for (const Result::Instruction& in : r.instructions) {
    r.instruction_views += in.views;
    r.instruction_kept += in.kept;
  }
  {
    v1::ListSummariesRequest req;
    req.set_conversation_id(id);
    req.set_include_superseded(true);
    std::set<int64_t> superseders;
    do {
      v1::ListSummariesResponse out;
      grpc::ClientContext ctx;
      SetDeadline(ctx);
      if (!Note(r, stub.ListSummaries(&ctx, req, &out))) break;
      for (const v1::SummaryChunk& c : out.chunks()) {
        ++r.chunks_written;
        if (c.superseded_by() == 0) ++r.chunks_active;
        if (c.superseded_by() != 0) superseders.insert(c.superseded_by());
        if (c.has_recall()) r.min_recall = std::min(r.min_recall, c.recall());
      }
      req.set_page_token(out.next_page_token());
    } while (!req.page_token().empty());
    r.folds = static_cast<int>(superseders.size());
  }

  {
    v1::ListCompactionEventsRequest req;
    req.set_conversation_id(id);
    do {
      v1::ListCompactionEventsResponse out;
      grpc::ClientContext ctx;
      SetDeadline(ctx);
      if (!Note(r, stub.ListCompactionEvents(&ctx, req, &out))) break;
      for (const v1::CompactionEvent& e : out.events()) ++r.audit[e.event()];
      req.set_page_token(out.next_page_token());
    } while (!req.page_token().empty());
  }
}

absl::StatusOr<Result> Run(const Conversation& conv, const Options& options) {
  auto channel = grpc::CreateChannel(options.target, grpc::InsecureChannelCredentials());
  auto stub = v1::ConversationState::NewStub(channel);
  Result r;
  r.window = options.window;
  const int turns = options.max_turns > 0 ? std::min(options.max_turns, conv.turns()) : conv.turns();
  r.turns = turns;
  const int64_t reserve = static_cast<int64_t>(options.reserve_fraction * options.window);
  const std::string id = options.conversation_id.empty()
                             ? absl::StrCat("replay-", options.window)
                             : options.conversation_id;
  const absl::StatusOr<int64_t> created = CreateForReplay(*stub, id, conv, options, reserve, r);
  if (!created.ok()) return created.status();
  const int64_t system_tokens = *created;
  const int64_t fifo_budget = r.hard_threshold - reserve - system_tokens;
  std::set<int> fact_probes;
  std::map<int, const Probe*> recall_probes;
  for (const Probe& p : conv.probes) {
    if (p.kind == "instruction") r.instructions.push_back({p.turn, p.text});
    if (p.kind == "facts") fact_probes.insert(p.turn);
    if (p.kind == "recall") recall_probes[p.turn] = &p;
  }
  std::set<int64_t> last_chunks;
  size_t next = 0;
  for (int t = 1; t <= turns; ++t) {
    size_t end = next;
    while (end < conv.items.size() && conv.items[end].turn == t) ++end;
    if (end == next) continue;
    // The gateway's call before the model answers: the user's new message
    // as pending input.
    v1::BuildContextRequest build;
    build.set_conversation_id(id);
    *build.add_pending_input() = ToNewItem(conv.items[next]);
    grpc::ClientContext ctx;
    SetDeadline(ctx, absl::Seconds(120));
    const absl::Time started = absl::Now();
    auto stream = stub->StreamBuildContext(&ctx, build);
    v1::BuildContextEvent event;
    v1::BuildContextResponse view;
    bool have_view = false;
    bool compacted = false;
    while (stream->Read(&event)) {
      compacted |= event.has_compaction_started();
      if (event.has_compaction_completed()) ++r.tiers[event.compaction_completed().tier()];
      if (event.has_context()) {
        view = event.context();
        have_view = true;
      }
    }
    const grpc::Status finished = stream->Finish();
    r.build_micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - started));
    r.builds_compacting += compacted;
    if (Note(r, finished) && have_view) {
      const int64_t total = view.tokens().total();
      r.peak_tokens = std::max(r.peak_tokens, total);
      r.views_over_window += total > options.window;
      CountView(r, view);
      const std::string text = ViewText(view);
      r.views_invalid_utf8 += !IsValidUtf8(text);
      std::set<int64_t> chunks;
      for (const v1::ContextEntry& e : view.entries()) {
        if (e.summary_chunk_id() != 0 && e.section() == v1::SECTION_SUMMARY) {
          chunks.insert(e.summary_chunk_id());
        }
      }
      if (chunks != last_chunks && !chunks.empty()) {
        r.tokens_after_compaction.push_back(total - view.tokens().pending());
      }
      last_chunks = std::move(chunks);
      for (Result::Instruction& in : r.instructions) {
        if (t <= in.turn) continue;
        ++in.views;
        in.kept += text.find(in.text) != std::string::npos;
      }
      const bool fact_probe = fact_probes.contains(t);
      auto recall = recall_probes.find(t);
      if (fact_probe || recall != recall_probes.end()) {
        // FIFO with the same pending input: the newest turns that fit beside it.
        const FifoWindow fifo = Fifo(*stub, id, conv.system_prompt,
                                     fifo_budget - view.tokens().pending());
        const std::string fifo_text = fifo.text + conv.items[next].content + "\n";
        if (fact_probe) {
          r.probes.push_back({t, CountFacts(conv.facts, text, t),
                              CountFacts(conv.facts, fifo_text, t)});
        }
        if (recall != recall_probes.end()) {
          const std::vector<std::string>& ids = recall->second->fact_ids;
          std::string recalled;
          for (const v1::ContextEntry& e : view.entries()) {
            if (e.section() == v1::SECTION_RECALLED) absl::StrAppend(&recalled, e.content(), "\n");
          }
          r.recalls.push_back({t, static_cast<int>(ids.size()), FactsIn(conv.facts, ids, text),
                               FactsIn(conv.facts, ids, fifo_text), view.tokens().recalled(),
                               std::move(recalled)});
        }
      }
    }
    // The whole turn, as the gateway stores it after the model answered.
    v1::AppendTurnRequest append;
    append.set_conversation_id(id);
    append.set_idempotency_key(absl::StrCat(id, "-turn-", t));
    for (size_t i = next; i < end; ++i) *append.add_items() = ToNewItem(conv.items[i]);
    v1::AppendTurnResponse appended;
    grpc::ClientContext actx;
    SetDeadline(actx);
    Note(r, stub->AppendTurn(&actx, append, &appended));
    next = end;
  }

  ReadFinalState(*stub, id, conv, turns, options, r);

  // FIFO over the same stored items and counts, with nothing pending.
  const FifoWindow fifo = Fifo(*stub, id, conv.system_prompt, fifo_budget);
  if (!fifo.ok) ++r.errors["ListItems"];
  r.fifo_tokens = fifo.tokens + system_tokens + reserve;
  r.fifo_facts = CountFacts(conv.facts, fifo.text, turns + 1);
  if (!options.keep) {
    v1::DeleteConversationRequest req;
    req.set_conversation_id(id);
    v1::DeleteConversationResponse out;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    Note(r, stub->DeleteConversation(&ctx, req, &out));
  }
  return r;
}

double Result::BuildPercentile(double p) const {
  if (build_micros.empty()) return 0;
  std::vector<double> v = build_micros;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

std::vector<std::string> LossesToFifo(const Result& r) {
  std::vector<std::string> out;
  if (r.facts.present() < r.fifo_facts.present()) {
    out.push_back(absl::StrCat("window ", r.window, ": the final view keeps ", r.facts.present(),
                               " facts, FIFO ", r.fifo_facts.present()));
  }
  for (const Result::ProbeCount& p : r.probes) {
    if (p.view.present() < p.fifo.present()) {
      out.push_back(absl::StrCat("window ", r.window, ", turn ", p.turn, ": the view keeps ",
                                 p.view.present(), " facts, FIFO ", p.fifo.present()));
    }
  }
  for (const Result::Instruction& in : r.instructions) {
    if (in.kept < in.views) {
      out.push_back(absl::StrCat("window ", r.window, ": the instruction of turn ", in.turn,
                                 " is in ", in.kept, " of ", in.views, " views"));
    }
  }
  if (r.views_over_hard * 50 > r.views) {
    out.push_back(absl::StrCat("window ", r.window, ": ", r.views_over_hard, " of ", r.views,
                               " views served at or above the hard band (", r.hard_threshold,
                               " tokens); at most 2% may be"));
  }
  return out;
}

std::string Report(const std::vector<Result>& results) {
  std::string out;
  absl::StrAppend(&out,
                  "| window | facts kept (msg / tool) | FIFO facts (msg / tool) | instruction kept | "
                  "summaries / folds / prunes | chunks active | peak view | over hard band | "
                  "over window | min recall |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    auto at = [&r](const char* event) {
      auto it = r.audit.find(event);
      return it == r.audit.end() ? 0 : it->second;
    };
    absl::StrAppendFormat(
        &out, "| %d | **%d** / %d (%d / %d) | %d / %d (%d / %d) | %d of %d views | %d / %d / %d | %d | %d | %d of %d | %d | %.2f |\n",
        r.window, r.facts.present(), r.facts.total(), r.facts.message, r.facts.tool,
        r.fifo_facts.present(), r.fifo_facts.total(), r.fifo_facts.message, r.fifo_facts.tool,
        r.instruction_kept, r.instruction_views, r.chunks_written - r.folds, r.folds, at("pruned"),
        r.chunks_active, r.peak_tokens, r.views_over_hard, r.views, r.views_over_window,
        r.min_recall);
  }
  for (const Result& r : results) {
    absl::StrAppend(&out, "\nwindow ", r.window, " (", r.turns, " turns):\n");
    if (r.final_sections.size() == 5) {
      absl::StrAppend(&out, "  final view by section: system ", r.final_sections[0], ", pinned ",
                      r.final_sections[1], ", summaries ", r.final_sections[2], ", ledger ",
                      r.final_sections[3], ", live ", r.final_sections[4], "\n");
    }
    absl::StrAppendFormat(&out, "  BuildContext with the message pending: p50 %.1f ms, p99 %.1f ms (%d calls)\n",
                          r.BuildPercentile(0.5) / 1000, r.BuildPercentile(0.99) / 1000,
                          static_cast<int>(r.build_micros.size()));
    absl::StrAppend(&out, "  views at or above the hard band (", r.hard_threshold, " tokens): ",
                    r.views_over_hard, " of ", r.views);
    for (const auto& [reason, n] : r.over_hard_reasons) {
      absl::StrAppend(&out, "; ", n, "x ", reason);
    }
    absl::StrAppend(&out, "\n  tokens right after each compaction: ",
                    absl::StrJoin(r.tokens_after_compaction, " "), "\n");
    absl::StrAppend(&out, "  facts per topic (kept / FIFO / total):");
    for (const auto& [topic, counts] : r.facts.by_topic) {
      const auto fifo = r.fifo_facts.by_topic.at(topic);
      absl::StrAppend(&out, " ", topic, " ", counts.first, "/", fifo.first, "/", counts.second);
    }
    absl::StrAppend(&out, "\n  facts at probe turns (view / FIFO / given before):");
    for (const Result::ProbeCount& p : r.probes) {
      absl::StrAppend(&out, " turn ", p.turn, ": ", p.view.present(), "/", p.fifo.present(), "/",
                      p.view.total());
    }
    absl::StrAppend(&out, "\n  standing instructions (views holding it / views after it; final view):");
    for (const Result::Instruction& in : r.instructions) {
      absl::StrAppend(&out, "\n    turn ", in.turn, " \"", in.text.substr(0, 48),
                      in.text.size() > 48 ? "...\"" : "\"", ": ", in.kept, "/", in.views,
                      in.in_final_view ? "; final yes" : "; final NO");
    }
    if (!r.recalls.empty()) {
      int asked = 0, in_view = 0, in_fifo = 0;
      absl::StrAppend(&out, "\n  recall questions (facts asked for in view / FIFO / asked; recalled tokens):");
      for (const Result::Recall& q : r.recalls) {
        absl::StrAppend(&out, " turn ", q.turn, ": ", q.in_view, "/", q.in_fifo, "/", q.asked, " (",
                        q.recalled_tokens, ")");
        asked += q.asked;
        in_view += q.in_view;
        in_fifo += q.in_fifo;
      }
      absl::StrAppend(&out, "; all: ", in_view, "/", in_fifo, "/", asked);
    }
    absl::StrAppend(&out, "\n  blocking compaction steps (StreamBuildContext):");
    for (const auto& [tier, n] : r.tiers) absl::StrAppend(&out, " ", tier, " ", n);
    absl::StrAppend(&out, "\n  audit rows:");
    for (const auto& [event, n] : r.audit) absl::StrAppend(&out, " ", event, " ", n);
    absl::StrAppend(&out, "\n  ledger facts left out of the final view: ", r.ledger_facts_omitted,
                    "; FIFO window tokens: ", r.fifo_tokens, "; views with invalid UTF-8: ",
                    r.views_invalid_utf8, "\n");
    if (!r.errors.empty()) {
      absl::StrAppend(&out, "  RPC errors:");
      for (const auto& [code, n] : r.errors) absl::StrAppend(&out, " ", code, " ", n);
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

}  // namespace convstate::replay
