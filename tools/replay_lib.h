#ifndef CONVSTATE_TOOLS_REPLAY_LIB_H_
#define CONVSTATE_TOOLS_REPLAY_LIB_H_

// Replays a conversation through a running convstate server as a gateway
// would, turn by turn (BuildContext with the user's message as pending
// input, then AppendTurn of the whole turn), and measures what the windows
// it returns keep: planted facts verbatim in the final view, a standing
// instruction in every view after it was given, compactions by tier, and
// the same facts for a plain FIFO window over the same stored items.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convstate/v1/convstate.pb.h"
#include "services/core/types.h"

namespace convstate::replay {

struct ReplayItem {
  int turn = 0;
  std::string role;  // "user", "assistant", "tool"
  std::string kind;  // "message", "tool_call", "tool_result"
  std::string content;
  std::string tool_name;
  std::string call_id;
};

struct Fact {
  std::string id;
  int turn = 0;
  std::string topic;
  std::string source;  // "message" or "tool"
  std::string text;
};

struct Probe {
  std::string kind;  // "instruction", "facts" or "recall"
  int turn = 0;
  std::string text;  // For "instruction": the rule, verbatim.
  // For "recall": the facts the user's message at `turn` asks about.
  std::vector<std::string> fact_ids;
};

struct Conversation {
  std::string system_prompt;
  std::vector<ReplayItem> items;
  std::vector<Fact> facts;
  std::vector<Probe> probes;
  int turns() const { return items.empty() ? 0 : items.back().turn; }
};

// `r` as storage would hold it at `sequence`: for what ranks stored items
// without a server (recall_eval, the recall tests and benchmark).
Item StoredItem(const ReplayItem& r, int64_t sequence);

// How many of the facts `ids` names `text` holds verbatim.
int FactsIn(const std::vector<Fact>& facts, const std::vector<std::string>& ids,
            const std::string& text);

// A FIFO window with old tool output pruned, the baseline a view is
// measured against: the newest whole turns of `items` (as stored; summary
// markers are skipped) that fit `budget` tokens, tool results older than
// the newest turn replaced by a 20-token placeholder, no summaries; its
// text after `system_prompt`, and its tokens in `tokens`.
std::string FifoOf(const std::vector<v1::Item>& items, const std::string& system_prompt,
                   int64_t budget, int64_t* tokens = nullptr);

// Reads the conversation file (JSON lines: an optional {"system_prompt"}
// line, then turn, role, kind, content, tool_name, call_id), the facts
// file (id, turn, topic, source, text) and, if `probes_path` is not empty,
// the probes file (kind, turn, text).
absl::StatusOr<Conversation> Load(const std::string& conversation_path,
                                  const std::string& facts_path, const std::string& probes_path);

struct Options {
  std::string target;  // host:port of the server, loopback.
  std::string model = "gpt-4o";
  int64_t window = 16384;
  // The output reserve as a share of the window.
  double reserve_fraction = 0.125;
  // Replay only the first turns (0: all).
  int max_turns = 0;
  // A fresh conversation id per run.
  std::string conversation_id;
  // The conversation's recall_budget_fraction override (negative: the
  // profile's); 0 replays without the RECALLED section.
  double recall_budget = -1;
  // Leave the conversation stored after the run (to inspect it with
  // InspectContext or SearchHistory) instead of deleting it.
  bool keep = false;
};

// Counts of facts present in a view.
struct FactCount {
  int message = 0, message_total = 0;
  int tool = 0, tool_total = 0;
  std::map<std::string, std::pair<int, int>> by_topic;  // present, total
  int present() const { return message + tool; }
  int total() const { return message_total + tool_total; }
};

struct Result {
  int64_t window = 0;
  int turns = 0;
  FactCount facts;       // In the final view.
  FactCount fifo_facts;  // In the FIFO window over the same items.
  int64_t fifo_tokens = 0;
  // Each standing instruction: the views after it was given (the final
  // one included) and how many of them held it verbatim; and all of them.
  struct Instruction {
    int turn = 0;
    std::string text;
    int views = 0;
    int kept = 0;
    bool in_final_view = false;
  };
  std::vector<Instruction> instructions;
  int instruction_views = 0;
  int instruction_kept = 0;
  // Facts given before each "facts" probe turn, present in that turn's view
  // and in a FIFO window over the same stored items and pending input.
  struct ProbeCount {
    int turn = 0;
    FactCount view;
    FactCount fifo;
  };
  std::vector<ProbeCount> probes;
  // Each "recall" probe: the facts asked for, and how many of them the
  // view and the FIFO window held when the question was pending.
  struct Recall {
    int turn = 0;
    int asked = 0;
    int in_view = 0;
    int in_fifo = 0;
    // Tokens of the view's recalled section.
    int64_t recalled_tokens = 0;
    // That section's entries, as the model reads them.
    std::string recalled_text;
  };
  std::vector<Recall> recalls;
  // Compaction steps reported by StreamBuildContext (blocking ones), by tier.
  std::map<std::string, int> tiers;
  // The audit trail's rows by event name (background compactions too).
  std::map<std::string, int> audit;
  // Chunks written (folds included), folds, active at the end, lowest recall.
  int chunks_written = 0, folds = 0, chunks_active = 0;
  double min_recall = 1.0;
  // View tokens (without pending input) of each view whose summaries
  // changed since the previous one: right after each compaction.
  std::vector<int64_t> tokens_after_compaction;
  int64_t peak_tokens = 0;
  int views_over_window = 0;
  // Views served (the final one included) and those at or above the hard
  // threshold, with the reasons the server gave for them.
  int views = 0;
  int views_over_hard = 0;
  int64_t hard_threshold = 0;
  std::map<std::string, int> over_hard_reasons;
  int views_invalid_utf8 = 0;
  // How long each StreamBuildContext with the user's message pending took,
  // from the call to its last event, in microseconds.
  std::vector<double> build_micros;
  // How many of those calls ran a compaction themselves (a compaction
  // event came first): the slowest calls are these.
  int builds_compacting = 0;
  // Its percentile `p` (0.5, 0.99) over the run; 0 when there was none.
  double BuildPercentile(double p) const;
  // Non-OK RPCs by code name.
  std::map<std::string, int> errors;
  int ledger_facts_omitted = 0;
  // The final view's tokens by section: system, pinned, summaries, ledger, live.
  std::vector<int64_t> final_sections;
  // The final view, entry by entry (for --dump).
  std::string final_view;
};

// Replays `conversation` against the server at `options.target`.
absl::StatusOr<Result> Run(const Conversation& conversation, const Options& options);

// A plain-text report of `results` (one per window).
std::string Report(const std::vector<Result>& results);

// Where the view kept fewer facts than FIFO held to the hard band's budget
// (the final view, or a probe turn's), missed a standing instruction, or
// more than 2% of the views were served at or above the hard band: one
// line each; empty when the view did at least as well everywhere.
std::vector<std::string> LossesToFifo(const Result& result);

}  // namespace convstate::replay

#endif  // CONVSTATE_TOOLS_REPLAY_LIB_H_
