// `pagedinfer chat` on a pseudo-terminal, typed into as a user would: a message edited with
// the left arrow before Enter (libedit's line editing), Ctrl-C in the middle of the reply
// (the reply stops, the program stays), the up arrow bringing back the last line (history),
// and the next message answered with the whole conversation, the cut reply included.
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/cli_process.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

TEST(ChatPty, EditInterruptAndContinue) {
  const std::string bin = testing::PagedinferBin();
  if (bin.empty()) GTEST_SKIP() << "pagedinfer binary not built ($PAGEDINFER_BIN unset)";
  PINFER_REQUIRE_MODEL(model, "stories260K.gguf");
  // 30 ms after each step: a 200-token reply takes 6 s, so Ctrl-C lands in the middle of it.
  auto chat = testing::PtyProcess::Start(
      {bin, "chat", "-m", model, "--temp", "0", "-n", "200", "-c", "512", "--threads", "1"},
      {"PAGEDINFER_STEP_DELAY_MS=30"});
  ASSERT_NE(chat, nullptr);
  ASSERT_TRUE(chat->WaitFor("\n> ")) << chat->output();

  // "Tell me about a dog", three left arrows, "big ": the line sent is "... a big dog".
  size_t mark = chat->output().size();
  chat->Type("Tell me about a dog");
  chat->Type("\x1b[D\x1b[D\x1b[D");
  chat->Type("big ");
  chat->Type("\r");
  // The line's echo (with libedit's redraws) ends at the first newline; after it, let 40
  // bytes of the reply arrive, then interrupt it.
  ASSERT_TRUE(chat->WaitFor("\n", mark)) << chat->output();
  ASSERT_TRUE(chat->WaitForBytes(chat->output().find('\n', mark) + 40, 30)) << chat->output();
  chat->Type("\x03");
  ASSERT_TRUE(chat->WaitFor("(interrupted)", mark)) << chat->output();
  ASSERT_TRUE(chat->WaitFor("\n> ", chat->output().find("(interrupted)", mark))) << chat->output();

  // The conversation holds the edited message and the part of the reply that was written.
  mark = chat->output().size();
  chat->Type("/history\r");
  ASSERT_TRUE(chat->WaitFor("assistant: ", mark)) << chat->output();
  ASSERT_TRUE(chat->WaitFor("\n> ", chat->output().find("assistant: ", mark)));
  const std::string history = chat->output().substr(mark);
  EXPECT_NE(history.find("user: Tell me about a big dog"), std::string::npos) << history;
  const size_t reply_at = history.find("assistant: ");
  std::string reply = history.substr(reply_at + 11, history.find('\n', reply_at) - reply_at - 11);
  if (!reply.empty() && reply.back() == '\r') reply.pop_back();  // the terminal's CR LF
  EXPECT_GT(reply.size(), 3u) << chat->output();

  // The up arrow brings back "/history"; the next message is answered (the program lived).
  mark = chat->output().size();
  chat->Type("\x1b[A");
  ASSERT_TRUE(chat->WaitFor("/history", mark, 10)) << chat->output().substr(mark);
  chat->Type("\x15");  // Ctrl-U: clear the line
  chat->Type("What did the dog do?\r");
  ASSERT_TRUE(chat->WaitFor("\n> ", mark + 20, 60)) << chat->output().substr(mark);
  mark = chat->output().size();
  chat->Type("/history\r");
  ASSERT_TRUE(chat->WaitFor("user: What did the dog do?", mark)) << chat->output().substr(mark);
  const std::string after = chat->output().substr(mark);
  EXPECT_NE(after.find("user: Tell me about a big dog"), std::string::npos) << after;
  EXPECT_NE(after.find("assistant: " + reply), std::string::npos) << after;
  chat->Type("\x04");  // Ctrl-D on an empty line: leave
  EXPECT_EQ(chat->Wait(), 0) << chat->output();
}

}  // namespace
}  // namespace pinfer
