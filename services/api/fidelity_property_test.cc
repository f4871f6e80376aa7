// The fidelity promise, checked on random conversations: whatever the
// window, the profile and the shape of the conversation, the view a gateway
// gets keeps at least as many of the facts stated so far as a FIFO window
// with old tool output pruned, held to the budget the hard band leaves a
// view (the hard threshold's total less output reserve, system prompt and
// pending input), computed on the same stored items with the same pending
// input; no view is served at or above the hard band unless it says why,
// and at most 2% are; and every standing instruction the user gave is in
// every later view, verbatim.

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "services/api/conversation_service.h"
#include "services/compaction/summarizers/extractive.h"
#include "storage/memory_storage.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

constexpr char kProfiles[] = R"pb(
  default_profile: "default"
  profiles {
    name: "default"
    context_window: 128000
    output_reserve: 4096
    tokenizer { encoding: "approximate" bytes_per_token: 4.0 }
  }
)pb";

const char* const kFiller[] = {
    "The copy is the easy part and the risk sits in the minutes when both sides accept writes.",
    "I would rather run one more check than discover a drift during the change itself.",
    "Nothing here needs a decision tonight but it is worth writing down while it is fresh.",
    "Connection pools on the application side tend to hold stale addresses for a while.",
    "The dashboards lag by about a minute so the numbers are slightly behind what users see.",
    "Most incidents like this come from caching and hard-coded addresses rather than the data.",
    "We should keep the old side read-only for a few days after the switch, just in case.",
    "The team that owns this service has been responsive which makes sequencing easier.",
    "Throughput from the trial run is conservative because it also validates every row.",
    "That sounds right to me, let us keep going with the plan as it stands.",
};

// Rules as users give them, and the rule each must show in every later
// view (whole, or shortened to it).
struct Rule {
  const char* said;
  const char* rule;
};
const Rule kRules[] = {
    {"One rule for this project: never restart anything in the payments namespace before 18:00.",
     "never restart anything in the payments namespace before 18:00"},
    {"Please keep this in mind for everything we do, every schema change needs a rollback step "
     "before it is approved.",
     "every schema change needs a rollback step before it is approved"},
    {"From now on, quote error lines exactly as the tool printed them.",
     "quote error lines exactly as the tool printed them"},
    {"Until further notice, run every copy with the throttle flag set to 50.",
     "run every copy with the throttle flag set to 50"},
};

// A random conversation, as a gateway would store it turn by turn.
struct Turn {
  std::vector<v1::NewItem> items;  // items[0] is the user's message
  // Facts stated once the user's message is pending, and once the turn is
  // stored.
  size_t facts_with_message = 0;
  size_t facts_with_turn = 0;
};

struct Conversation {
  std::vector<Turn> turns;
  std::vector<std::string> facts;  // each stated once, verbatim
  std::map<int, std::string> rules;  // turn -> the rule a view must show
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  Conversation Make(int turns, int64_t window) {
    Conversation c;
    for (int t = 0; t < turns; ++t) {
      Turn turn;
      std::string user = Filler(Pick(0, 2));
      // Some messages are dense with facts, some carry one or none.
      const int facts = Chance(0.15) ? Pick(4, 8) : Pick(0, 2);
      for (int f = 0; f < facts; ++f) absl::StrAppend(&user, " ", FactSentence(c));
      if (c.rules.size() < 4 && Chance(0.05)) {
        const Rule& rule = kRules[c.rules.size()];
        absl::StrAppend(&user, " ", rule.said, " ", Filler(Pick(0, 1)));
        c.rules[t] = rule.rule;
      }
      if (user.empty()) user = "Go on.";
      turn.items.push_back(Item(v1::ROLE_USER, v1::ITEM_KIND_MESSAGE, user));
      turn.facts_with_message = c.facts.size();
      if (Chance(0.5)) {
        const std::string call = absl::StrCat("call_", t);
        turn.items.push_back(Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_TOOL_CALL,
                                  R"({"cmd": "inspect"})", "shell", call));
        // Tool output up to a fifth of the window, now and then with a fact.
        std::string output;
        const int lines = Pick(5, static_cast<int>(std::max<int64_t>(6, window / 100)));
        for (int l = 0; l < lines; ++l) {
          absl::StrAppend(&output, "row ", l, " status ok latency ", Pick(1, 999), "us\n");
        }
        if (Chance(0.3)) absl::StrAppend(&output, FactSentence(c), "\n");
        turn.items.push_back(Item(v1::ROLE_TOOL, v1::ITEM_KIND_TOOL_RESULT, output, "shell", call));
      }
      std::string answer = Filler(Pick(1, 6));
      if (Chance(0.4)) absl::StrAppend(&answer, " ", FactSentence(c));
      turn.items.push_back(Item(v1::ROLE_ASSISTANT, v1::ITEM_KIND_MESSAGE, answer));
      turn.facts_with_turn = c.facts.size();
      c.turns.push_back(std::move(turn));
    }
    return c;
  }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::string Filler(int sentences) {
    std::vector<std::string> out;
    for (int i = 0; i < sentences; ++i) out.push_back(kFiller[Pick(0, 9)]);
    return absl::StrJoin(out, " ");
  }

  // A sentence stating one new fact: an id, a host, a figure or a name.
  std::string FactSentence(Conversation& c) {
    const int n = static_cast<int>(c.facts.size()) + 1;
    std::string fact;
    std::string sentence;
    switch (Pick(0, 3)) {
      case 0:
        fact = absl::StrCat("CHG-", 1000 + n * 7);
        sentence = absl::StrCat("The change is tracked as ", fact, ".");
        break;
      case 1:
        fact = absl::StrCat("db", n, ".west.internal");
        sentence = absl::StrCat("Its data lives on ", fact, " today.");
        break;
      case 2:
        fact = absl::StrCat(100 + n * 13, " GB");
        sentence = absl::StrCat("The last estimate was ", fact, " with indexes.");
        break;
      default:
        fact = absl::StrCat("Owner", n, " Team", n);
        sentence = absl::StrCat("It is owned by ", fact, " this quarter.");
        break;
    }
    c.facts.push_back(fact);
    switch (Pick(0, 5)) {
      case 0:  // At the end of a long sentence with no clause breaks.
        return absl::StrCat("As far as I can tell from the notes the team kept over the last few "
                            "weeks and from what the owners told me when we met on the floor "
                            "yesterday afternoon after the review ",
                            absl::AsciiStrToLower(sentence.substr(0, 1)), sentence.substr(1));
      case 1: {  // Two facts in one sentence.
        const std::string second = FactSentence(c);
        return absl::StrCat(sentence.substr(0, sentence.size() - 1), ", and ",
                            absl::AsciiStrToLower(second.substr(0, 1)), second.substr(1));
      }
      default:
        return sentence;
    }
  }

  static v1::NewItem Item(v1::Role role, v1::ItemKind kind, std::string content,
                          std::string tool = "", std::string call = "") {
    v1::NewItem item;
    item.set_role(role);
    item.set_kind(kind);
    item.set_content(std::move(content));
    item.set_tool_name(std::move(tool));
    item.set_tool_call_id(std::move(call));
    return item;
  }

  std::mt19937 rng_;
};

int FactsIn(const std::vector<std::string>& facts, size_t stated, const std::string& text) {
  int n = 0;
  for (size_t i = 0; i < stated && i < facts.size(); ++i) {
    n += text.find(facts[i]) != std::string::npos;
  }
  return n;
}

std::string TextOf(const v1::BuildContextResponse& view) {
  std::string out;
  for (const v1::ContextEntry& e : view.entries()) absl::StrAppend(&out, e.content(), "\n");
  return out;
}

TEST(FidelityPropertyTest, NeverFewerFactsThanPrunedFifoAndEveryRuleInEveryView) {
  auto models = ModelRegistry::FromText(kProfiles, "");
  ASSERT_TRUE(models.ok()) << models.status();
  const CallContext ctx{};
  int compared = 0, strictly_more = 0, views = 0, over_hard = 0;
  std::map<std::string, int> reasons;  // Why views were above the hard band.
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    std::mt19937 rng(seed * 7919);
    const int64_t windows[] = {4096, 8192, 16384, 32768};
    const int64_t window = windows[rng() % 4];
    std::unique_ptr<Storage> storage = NewMemoryStorage();
    std::unique_ptr<Summarizer> summarizer = NewExtractiveSummarizer();
    ConversationService::Options options;
    options.background_compaction = false;  // Every run the same.
    ConversationService service(options, models->get(), storage.get(), summarizer.get());
    Generator gen(seed);
    // Enough turns to pass the window several times.
    const Conversation conv = gen.Make(static_cast<int>(40 + window / 400), window);

    const std::string id = absl::StrCat("c", seed);
    v1::CreateConversationRequest create;
    create.set_conversation_id(id);
    create.set_model("default");
    create.set_system_prompt("You are the migration assistant.");
    v1::ProfileOverrides& o = *create.mutable_profile_overrides();
    o.set_context_window(window);
    o.set_output_reserve(window / 8);
    o.set_recent_turns(static_cast<int32_t>(1 + rng() % 4));
    ASSERT_TRUE(service.CreateConversation(ctx, create).ok());
    const int64_t reserve = window / 8;

    std::vector<std::string> rules_given;
    for (size_t t = 0; t < conv.turns.size(); ++t) {
      const Turn& turn = conv.turns[t];
      v1::BuildContextRequest build;
      build.set_conversation_id(id);
      *build.add_pending_input() = turn.items[0];
      auto view = service.BuildContext(ctx, build);
      ASSERT_TRUE(view.ok()) << "seed " << seed << " turn " << t << ": " << view.status();
      const std::string text = TextOf(*view);
      ++views;
      if (view->tokens().total() >= static_cast<int64_t>(0.80 * static_cast<double>(window))) {
        ++over_hard;
        ++reasons[view->band_reason().substr(0, view->band_reason().find_first_of("(:"))];
        if (std::getenv("FIDELITY_DEBUG") != nullptr && over_hard < 15) {
          std::printf("seed %u window %ld turn %zu status %d: %s\n", seed, (long)window, t,
                      view->context_status(), view->band_reason().c_str());
        }
        EXPECT_GE(view->band(), v1::BAND_HARD);
        EXPECT_FALSE(view->band_reason().empty())
            << "seed " << seed << " turn " << t << ": served above the hard band, no reason";
      }
      for (const std::string& rule : rules_given) {
        ASSERT_NE(text.find(rule), std::string::npos)
            << "seed " << seed << " window " << window << " turn " << t << ": the rule \"" << rule
            << "\" is missing from the view";
      }
      if (t % 10 == 9 || t + 1 == conv.turns.size()) {
        v1::ListItemsRequest list;
        list.set_conversation_id(id);
        list.set_page_size(1000);
        auto items = service.ListItems(ctx, list);
        ASSERT_TRUE(items.ok());
        const std::vector<v1::Item> stored(items->items().begin(), items->items().end());
        // The room the hard band (0.80, the profile's) leaves a view.
        const int64_t hard = static_cast<int64_t>(0.80 * static_cast<double>(window));
        const std::string fifo =
            replay::FifoOf(stored, create.system_prompt(),
                           hard - reserve - view->tokens().system() - view->tokens().pending()) +
            turn.items[0].content();
        const int kept = FactsIn(conv.facts, turn.facts_with_message, text);
        const int fifo_kept = FactsIn(conv.facts, turn.facts_with_message, fifo);
        ++compared;
        strictly_more += kept > fifo_kept;
        if (kept < fifo_kept && std::getenv("FIDELITY_DEBUG") != nullptr) {
          for (size_t i = 0; i < turn.facts_with_message; ++i) {
            if (fifo.find(conv.facts[i]) != std::string::npos &&
                text.find(conv.facts[i]) == std::string::npos) {
              std::printf("seed %u missing %s\n", seed, conv.facts[i].c_str());
            }
          }
          std::printf("omitted %d status %d tokens total %ld live %ld ledger %ld summaries %ld\n%s\n",
                      view->ledger_facts_omitted(), view->context_status(),
                      (long)view->tokens().total(), (long)view->tokens().live(),
                      (long)view->tokens().ledger(), (long)view->tokens().summaries(),
                      std::getenv("FIDELITY_DEBUG")[0] == '2' ? text.c_str() : "");
        }
        EXPECT_GE(kept, fifo_kept) << "seed " << seed << " window " << window << " turn " << t
                                   << ": the view keeps " << kept << " facts, FIFO " << fifo_kept
                                   << " (of " << turn.facts_with_message << ")";
      }
      v1::AppendTurnRequest append;
      append.set_conversation_id(id);
      for (const v1::NewItem& item : turn.items) *append.add_items() = item;
      ASSERT_TRUE(service.AppendTurn(ctx, append).ok()) << "seed " << seed << " turn " << t;
      if (auto rule = conv.rules.find(static_cast<int>(t)); rule != conv.rules.end()) {
        rules_given.push_back(rule->second);
      }
    }
  }
  // The comparison ran, and it is not vacuous: compaction did win somewhere.
  std::printf("compared %d times; the view kept strictly more facts %d times; %d of %d views "
              "at or above the hard band\n",
              compared, strictly_more, over_hard, views);
  for (const auto& [reason, n] : reasons) std::printf("  %dx %s\n", n, reason.c_str());
  EXPECT_LE(over_hard * 50, views) << "more than 2% of views served above the hard band";
  EXPECT_GT(compared, 100);
  EXPECT_GT(strictly_more, compared / 4);
}

}  // namespace
}  // namespace convstate
