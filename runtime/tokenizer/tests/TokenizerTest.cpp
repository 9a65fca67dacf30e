// Unit tests of the tokenizer library: the byte tokenizer, GPT-2's
// pre-tokenisation and BPE on the hand-made vocabulary of Inputs/ (its
// README.md), every load and decode error, the factory and the llm.c token
// file. test_gpt2_tokenizer.py checks megatron-tokenize against a Python
// implementation of GPT-2's encoder.
#include "PreTokenize.h"
#include "TokenFileFormat.h"
#include "Tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using mtok::BPETokenizer;
using Strings = std::vector<std::string>;

const std::string kInputs = MTOK_TEST_INPUTS;
const std::string kVocab = kInputs + "/vocab.json";
const std::string kMerges = kInputs + "/merges.txt";
const std::string kLlama3Json = kInputs + "/hf/llama3-style.json";

// Expects f to throw a std::runtime_error whose message contains every one
// of parts.
void expectError(const std::function<void()> &f, const Strings &parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with \"" << parts.front()
                  << "\"";
  } catch (const std::runtime_error &e) {
    for (const std::string &part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message: " << e.what() << "\nlacks: " << part;
  }
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A directory of its own for the files a test writes.
class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mtok-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return dir_ / name; }
  std::string write(const std::string &name, const std::string &bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

private:
  fs::path dir_;
};

// ---------------------------------------------------------------- bytes

TEST(ByteTokenizer, EveryByteIsItsOwnToken) {
  const mtok::ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b)
    all += static_cast<char>(b);
  const std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_EQ(tok.vocabSize(), 256);
  EXPECT_EQ(tok.decodeToken(0xE6), "\xE6");
}

TEST(ByteTokenizer, RefusesIdsOutsideTheVocabulary) {
  const mtok::ByteTokenizer tok;
  expectError([&] { tok.decode({104, 256}); },
              {"token id 256 is outside the vocabulary (ids 0..255) at "
               "position 1"});
  expectError([&] { tok.decodeToken(-1); },
              {"token id -1 is outside the vocabulary (ids 0..255)"});
}

// ---------------------------------------------------------------- pieces

Strings preTokens(const std::string &text,
                  mtok::PreTokenization pattern = mtok::PreTokenization::GPT2) {
  Strings pieces;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = mtok::preTokenEnd(pattern, text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

// Each expectation is what Python's regex.findall gives for GPT-2's pattern
// (on the text decoded with errors="surrogateescape").
TEST(PreTokenize, Contractions) {
  EXPECT_EQ(preTokens("it's"), (Strings{"it", "'s"}));
  EXPECT_EQ(preTokens("don't they're we've I'm you'll he'd"),
            (Strings{"don", "'t", " they", "'re", " we", "'ve", " I", "'m",
                     " you", "'ll", " he", "'d"}));
  EXPECT_EQ(preTokens("IT'S"), (Strings{"IT", "'", "S"})); // case-sensitive
  EXPECT_EQ(preTokens("'dog"), (Strings{"'d", "og"}));
  EXPECT_EQ(preTokens("''s"), (Strings{"''", "s"}));
  EXPECT_EQ(preTokens(" 's"), (Strings{" '", "s"}));
  EXPECT_EQ(preTokens("!'s"), (Strings{"!'", "s"}));
}

TEST(PreTokenize, SpacesLeadTheNextPiece) {
  EXPECT_EQ(preTokens("Hello world"), (Strings{"Hello", " world"}));
  EXPECT_EQ(preTokens("a  b"), (Strings{"a", " ", " b"}));
  EXPECT_EQ(preTokens("a   b"), (Strings{"a", "  ", " b"}));
  EXPECT_EQ(preTokens("  lead"), (Strings{" ", " lead"}));
  EXPECT_EQ(preTokens("end   "), (Strings{"end", "   "}));
  EXPECT_EQ(preTokens(" "), (Strings{" "}));
  EXPECT_EQ(preTokens("a \n b"), (Strings{"a", " \n", " b"}));
  // Only U+0020 joins a word; other whitespace stands apart.
  EXPECT_EQ(preTokens("\t\tx"), (Strings{"\t", "\t", "x"}));
  EXPECT_EQ(preTokens("a\u3000b"), (Strings{"a", "\u3000", "b"}));
  // \s is Unicode's White_Space: no-break spaces are, the ASCII
  // separators 0x1C..0x1F are not (as Python's str.isspace() has them).
  EXPECT_EQ(preTokens("a \u00A0b"), (Strings{"a", " ", "\u00A0", "b"}));
  EXPECT_EQ(preTokens("s \x1C\x1Dt"), (Strings{"s", " \x1C\x1D", "t"}));
}

TEST(PreTokenize, Newlines) {
  EXPECT_EQ(preTokens("x\n\ny"), (Strings{"x", "\n", "\n", "y"}));
  EXPECT_EQ(preTokens("x\n\n y"), (Strings{"x", "\n\n", " y"}));
  EXPECT_EQ(preTokens("\r\n"), (Strings{"\r\n"}));
}

TEST(PreTokenize, LettersNumbersAndTheRest) {
  EXPECT_EQ(preTokens("abc123def"), (Strings{"abc", "123", "def"}));
  EXPECT_EQ(preTokens(" 42"), (Strings{" 42"}));
  EXPECT_EQ(preTokens("3.14"), (Strings{"3", ".", "14"}));
  EXPECT_EQ(preTokens("Hi!!! ..."), (Strings{"Hi", "!!!", " ..."}));
  // ½ (No), Ⅻ (Nl), ² (No) are numbers; a combining accent (Mn) is not a
  // letter.
  EXPECT_EQ(preTokens("\u00BD\u216B\u00B2"), (Strings{"\u00BD\u216B\u00B2"}));
  EXPECT_EQ(preTokens("e\u0301"), (Strings{"e", "\u0301"}));
  EXPECT_EQ(preTokens("x\u00B2,"), (Strings{"x", "\u00B2", ","}));
}

TEST(PreTokenize, NonAsciiLettersAndEmoji) {
  EXPECT_EQ(preTokens("caf\u00E9"), (Strings{"caf\u00E9"}));
  EXPECT_EQ(preTokens(" \u65E5\u672C\u8A9E"), (Strings{" \u65E5\u672C\u8A9E"}));
  EXPECT_EQ(preTokens("\U0001F600\U0001F600!"),
            (Strings{"\U0001F600\U0001F600!"}));
  EXPECT_EQ(preTokens("a\U0001F600"), (Strings{"a", "\U0001F600"}));
}

TEST(PreTokenize, InvalidUtf8BytesArePunctuation) {
  EXPECT_EQ(preTokens("x\xFFy"), (Strings{"x", "\xFF", "y"}));
  EXPECT_EQ(preTokens("!\xFF?"), (Strings{"!\xFF?"}));
  // Cut short, overlong forms ("/", "A") and a surrogate (U+D800).
  EXPECT_EQ(preTokens("x \xE2\x82"), (Strings{"x", " \xE2\x82"}));
  EXPECT_EQ(preTokens("\xC0\xAF"), (Strings{"\xC0\xAF"}));
  EXPECT_EQ(preTokens("x\xE0\x81\x81y"), (Strings{"x", "\xE0\x81\x81", "y"}));
  EXPECT_EQ(preTokens("a\xED\xA0\x80"), (Strings{"a", "\xED\xA0\x80"}));
}

// Llama 3's pattern: each expectation is Python's regex.findall of
// mtok::kLlama3Pattern.
Strings llama3Tokens(const std::string &text) {
  return preTokens(text, mtok::PreTokenization::Llama3);
}

TEST(PreTokenizeLlama3, ContractionsOfEitherCase) {
  EXPECT_EQ(llama3Tokens("it's IT'S You'LL"),
            (Strings{"it", "'s", " IT", "'S", " You", "'LL"}));
}

TEST(PreTokenizeLlama3, OnePunctuationOrSpaceLeadsAWord) {
  EXPECT_EQ(llama3Tokens("Hello world"), (Strings{"Hello", " world"}));
  EXPECT_EQ(llama3Tokens("(word [x]"), (Strings{"(word", " [", "x", "]"}));
  EXPECT_EQ(llama3Tokens("a\tb"), (Strings{"a", "\tb"}));
  EXPECT_EQ(llama3Tokens("\t\tx"), (Strings{"\t", "\tx"}));
  EXPECT_EQ(llama3Tokens("caf\u00E9 \u65E5\u672C"),
            (Strings{"caf\u00E9", " \u65E5\u672C"}));
  EXPECT_EQ(llama3Tokens("e\u0301"), (Strings{"e", "\u0301"}));
}

TEST(PreTokenizeLlama3, NumbersInThrees) {
  EXPECT_EQ(llama3Tokens("12345 678"), (Strings{"123", "45", " ", "678"}));
  EXPECT_EQ(llama3Tokens(" 42"), (Strings{" ", "42"}));
  EXPECT_EQ(llama3Tokens("3.14"), (Strings{"3", ".", "14"}));
  EXPECT_EQ(llama3Tokens("x\u00B2,"), (Strings{"x", "\u00B2", ","}));
}

TEST(PreTokenizeLlama3, LineBreaksEndTheirPiece) {
  EXPECT_EQ(llama3Tokens("x\n\ny"), (Strings{"x", "\n\n", "y"}));
  EXPECT_EQ(llama3Tokens("a  \n\n  b"), (Strings{"a", "  \n\n", " ", " b"}));
  EXPECT_EQ(llama3Tokens("Hi!!! ...\n\nend"),
            (Strings{"Hi", "!!!", " ...\n\n", "end"}));
  EXPECT_EQ(llama3Tokens(",\n\n"), (Strings{",\n\n"}));
  EXPECT_EQ(llama3Tokens("a \n b"), (Strings{"a", " \n", " b"}));
  EXPECT_EQ(llama3Tokens("  lead"), (Strings{" ", " lead"}));
  EXPECT_EQ(llama3Tokens("end   "), (Strings{"end", "   "}));
  EXPECT_EQ(llama3Tokens("\U0001F600\U0001F600!"),
            (Strings{"\U0001F600\U0001F600!"}));
}

// ---------------------------------------------------------------- BPE

// The bytes of each token encode() gives.
Strings tokens(const mtok::Tokenizer &tok, const std::string &text) {
  Strings out;
  for (int32_t id : tok.encode(text))
    out.push_back(tok.decodeToken(id));
  return out;
}

TEST(BPETokenizerGPT2, LoadsTheVocabulary) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tok.vocabSize(), 294);
}

// bytes_to_unicode(): ids 0..255 of Inputs/vocab.json are GPT-2's, the
// printable bytes first, then the others from U+0100 in byte order.
TEST(BPETokenizerGPT2, BytesThroughTheirSymbols) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tok.encode("!"), (std::vector<int32_t>{0}));    // '!'
  EXPECT_EQ(tok.encode(" "), (std::vector<int32_t>{220}));  // 'Ġ' U+0120
  EXPECT_EQ(tok.encode("\n"), (std::vector<int32_t>{198})); // 'Ċ' U+010A
  EXPECT_EQ(tok.encode(std::string(1, '\0')), (std::vector<int32_t>{188}));
  EXPECT_EQ(tok.encode("\x80"), (std::vector<int32_t>{222}));
  EXPECT_EQ(tok.encode("\xFF"), (std::vector<int32_t>{187})); // 'ÿ'
  EXPECT_EQ(tok.encode("\xAD"), (std::vector<int32_t>{255})); // 'Ń' U+0143
}

TEST(BPETokenizerGPT2, MergesByRankNotPosition) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  // "h e" (rank 0) comes before "t h" (rank 1): t+he, then the.
  EXPECT_EQ(tokens(tok, "the"), (Strings{"the"}));
  EXPECT_EQ(tokens(tok, "th"), (Strings{"th"}));
  EXPECT_EQ(tokens(tok, "there"), (Strings{"the", "re"}));
  EXPECT_EQ(tokens(tok, " the cat"), (Strings{" the", " cat"}));
  // "Ġ c" then "a f" then "Ġc af" then "Ġcaf Ã©".
  EXPECT_EQ(tokens(tok, " caf\u00E9"), (Strings{" caf\u00E9"}));
  EXPECT_EQ(tokens(tok, "caf\u00E9"), (Strings{"c", "af", "\u00E9"}));
}

TEST(BPETokenizerGPT2, MergesEveryOccurrenceLeftToRight) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tokens(tok, "ooo"), (Strings{"oo", "o"}));
  EXPECT_EQ(tokens(tok, "oooo"), (Strings{"oo", "oo"}));
  EXPECT_EQ(tokens(tok, "!!!!!"), (Strings{"!!", "!!", "!"}));
  // "Ġ Ġ" then "ĠĠ ĠĠ": nine spaces before a word are 8 + the word's one.
  EXPECT_EQ(tokens(tok, std::string(9, ' ') + "in"),
            (Strings{"    ", "    ", " ", "in"}));
  EXPECT_EQ(tokens(tok, "x\n\n y"), (Strings{"x", "\n\n", " ", "y"}));
}

TEST(BPETokenizerGPT2, ContractionsNumbersAndNonAscii) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tokens(tok, "it's"), (Strings{"i", "t", "'s"}));
  EXPECT_EQ(tokens(tok, "he'd'll're've'm't"),
            (Strings{"he", "'d", "'ll", "'re", "'ve", "'m", "'t"}));
  EXPECT_EQ(tokens(tok, "1234"), (Strings{"123", "4"}));
  EXPECT_EQ(tokens(tok, "\u65E5\u672C"), (Strings{"\u65E5\u672C"}));
  EXPECT_EQ(tokens(tok, "\U0001F600"), (Strings{"\U0001F600"}));
  // A token may be part of a character: streaming callers buffer.
  EXPECT_EQ(tokens(tok, "\u65E5\u8A9E"),
            (Strings{"\u65E5", "\xE8", "\xAA", "\x9E"}));
}

TEST(BPETokenizerGPT2, SpecialTokensAreOnlyText) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tokens(tok, "<|endoftext|>"),
            (Strings{"<", "|", "e", "n", "d", "o", "f", "t", "e", "x", "t",
                     "|", ">"}));
  EXPECT_NE(tok.encode("<|endoftext|>"), (std::vector<int32_t>{293}));
  EXPECT_EQ(tok.decode({293}), "<|endoftext|>");
}

TEST(BPETokenizerGPT2, RoundTripsAnyBytes) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  for (const std::string &text :
       {std::string("The cat's caf\u00E9: \u65E5\u672C \U0001F600!\n\n  x"),
        std::string("\xFF\xFE invalid \xC0\xAF utf-8 \xE2\x82"),
        std::string("tabs\t\tand\r\nlines\n"), std::string(),
        std::string("\0\x01\x7F", 3)})
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(BPETokenizerGPT2, RefusesIdsOutsideTheVocabulary) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(kVocab, kMerges);
  const mtok::Tokenizer &tok = *tokFiles;
  expectError([&] { tok.decode({0, 1, 294}); },
              {"token id 294 is outside the vocabulary (ids 0..293) at "
               "position 2"});
  expectError([&] { tok.decodeToken(-5); }, {"token id -5 is outside"});
}

// ---------------------------------------------------------------- errors

// vocab.json with the 256 byte tokens of Inputs/vocab.json and then
// `extra` (JSON members, each after a comma).
std::string byteVocab(const std::string &extra = "") {
  std::string json = readAll(kVocab);
  const size_t cut = json.find(",\n \"he\"");
  return json.substr(0, cut) + extra + "}";
}

class GPT2Errors : public TempDir {
protected:
  // Loads vocab.json text `vocab` with merges.txt text `merges`.
  void load(const std::string &vocab, const std::string &merges = "") {
    BPETokenizer::fromGPT2Files(write("vocab.json", vocab),
                                write("merges.txt", merges));
  }
};

TEST_F(GPT2Errors, MissingOrUnreadableFiles) {
  expectError([&] { BPETokenizer::fromGPT2Files(path("none.json"), kMerges); },
              {"vocab " + path("none.json") +
               ": cannot open: No such file or directory"});
  expectError([&] { BPETokenizer::fromGPT2Files(kVocab, path("none.txt")); },
              {"merges " + path("none.txt") + ": cannot open"});
  fs::create_directory(path("dir"));
  expectError([&] { BPETokenizer::fromGPT2Files(path("dir"), kMerges); },
              {"vocab " + path("dir") + ": not a regular file"});
}

TEST_F(GPT2Errors, MalformedJson) {
  expectError([&] { load("{\"a\": 1,\n"); },
              {"vocab " + path("vocab.json") + ": malformed JSON: ",
               "line 2"});
  expectError([&] { load("[1, 2]"); },
              {"expected a JSON object of token -> id, not array"});
}

TEST_F(GPT2Errors, EntriesThatAreNotTokenToId) {
  expectError([&] { load(byteVocab(",\"he\": \"256\"")); },
              {"token \"he\" has id \"256\", not an integer"});
  expectError([&] { load(byteVocab(",\"he\": 256.5")); },
              {"token \"he\" has id 256.5, not an integer"});
  expectError([&] { load(byteVocab(",\"he\": 300")); },
              {"token \"he\" has id 300, outside 0..256"});
  expectError([&] { load(byteVocab(",\"he\": -1")); },
              {"token \"he\" has id -1, outside 0..256"});
  expectError([&] { load(byteVocab(",\"he\": 0,\"in\": 256")); },
              {"id 0 is given to both \"!\" and \"he\""});
  expectError([&] { load(byteVocab(",\"\": 256")); },
              {"the empty token \"\" (id 256)"});
  expectError([&] { load(byteVocab(",\"h e\": 256")); },
              {"token \"h e\" contains U+0020, which is not one of GPT-2's "
               "256 byte symbols"});
}

TEST_F(GPT2Errors, EveryByteNeedsAToken) {
  std::string vocab = byteVocab();
  const size_t space = vocab.find("\"\u0120\": 220,");
  vocab.replace(space, std::string("\"\u0120\": 220,").size(), "\"he\": 220,");
  expectError([&] { load(vocab); },
              {"no token for byte 0x20 (its symbol \"\u0120\")"});
}

TEST_F(GPT2Errors, MalformedMergesLines) {
  const std::string vocab = byteVocab(",\"he\": 256");
  const std::string merges = path("merges.txt");
  for (const std::string bad : {"h", "h e x", " h e", "h  e", "h e ", ""})
    expectError([&] { load(vocab, "#version: 0.2\nh e\n" + bad + "\nh e\n"); },
                {"merges " + merges + ":3: expected a merge \"a b\" (two "
                 "tokens, one space), got \"" + bad + "\""});
  // Only the first line may be a #version line.
  expectError([&] { load(vocab, "#version: 0.2\n#version: 0.2\n"); },
              {merges + ":2: \"#version:\" is not in vocab"});
}

TEST_F(GPT2Errors, MergesOutsideTheVocabulary) {
  const std::string vocab = byteVocab(",\"he\": 256");
  expectError([&] { load(vocab, "h e\nhe Ġ\nt h\n"); },
              {"merges " + path("merges.txt") + ":2: its result \"heĠ\" is "
               "not in vocab " + path("vocab.json")});
  expectError([&] { load(vocab, "h e\nth e\n"); },
              {":2: \"th\" is not in vocab"});
  expectError([&] { load(vocab, "#version: 0.2\nh e\nh e\n"); },
              {":3: the merge \"h e\" is also on line 2"});
}

TEST_F(GPT2Errors, AcceptsWindowsLinesAndNoVersion) {
  const auto tokFiles = BPETokenizer::fromGPT2Files(write("vocab.json", byteVocab(",\"he\": 256")),
                          write("merges.txt", "h e\r\n"));
  const mtok::Tokenizer &tok = *tokFiles;
  EXPECT_EQ(tok.encode("he"), (std::vector<int32_t>{256}));
}

// ---------------------------------------------------------------- tokenizer.json

// Inputs/hf: byte-level BPE trained by Hugging Face's tokenizers
// (make_hf_tokenizers.py); test_hf_tokenizer.py compares whole texts with
// that library.
TEST(BPETokenizerJson, Llama3StyleFile) {
  const auto tok = BPETokenizer::fromTokenizerJson(kLlama3Json);
  EXPECT_EQ(tok->vocabSize(), 422);
  // Added tokens are recognised in the text, and decode as their text.
  const std::vector<int32_t> ids = tok->encode("<|begin_of_text|>The fox");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 420);
  EXPECT_EQ(tok->decode(ids), "<|begin_of_text|>The fox");
  EXPECT_EQ(tokens(*tok, "x<|end_of_text|>y"),
            (Strings{"x", "<|end_of_text|>", "y"}));
}

class JsonErrors : public TempDir {
protected:
  // The Llama 3-style file with `edit` applied to its text.
  std::string edited(const std::string &from, const std::string &to) {
    std::string json = readAll(kLlama3Json);
    const size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return write("tokenizer.json", json.replace(at, from.size(), to));
  }
  void load(const std::string &path) { BPETokenizer::fromTokenizerJson(path); }
};

TEST_F(JsonErrors, NamesWhatIsNotSupported) {
  const std::string file = "tokenizer.json " + path("tokenizer.json") + ": ";
  expectError([&] { load(edited("\"normalizer\": null",
                                "\"normalizer\": {\"type\": \"NFC\"}")); },
              {file + "normalizer {\"type\":\"NFC\"} is not supported"});
  expectError([&] { load(edited("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")); },
              {file + "model \"WordPiece\" is not supported (only BPE)"});
  expectError([&] { load(edited("\"byte_fallback\": false",
                                "\"byte_fallback\": true")); },
              {file + "model.byte_fallback is not supported"});
  expectError([&] { load(edited("\"behavior\": \"Isolated\"",
                                "\"behavior\": \"Removed\"")); },
              {file + "pre_tokenizer ", "is not supported (known: GPT-2's"});
  expectError([&] { load(edited("\"lstrip\": false", "\"lstrip\": true")); },
              {file + "added_tokens[0] lstrip is not supported"});
  expectError([&] { load(edited("\"id\": 421", "\"id\": 425")); },
              {file + "no token has id 421 (the ids are 0..425"});
  expectError([&] { load(edited("\"dropout\": null", "\"dropout\": 0.1")); },
              {file + "model.dropout 0.1 is not supported"});
  expectError([&] { load(edited("\"unk_token\": null",
                                "\"unk_token\": \"<unk>\"")); },
              {file + "model.unk_token \"<unk>\" is not supported"});
  expectError([&] { load(edited("\"continuing_subword_prefix\": null",
                                "\"continuing_subword_prefix\": \"##\"")); },
              {file + "model.continuing_subword_prefix \"##\" is not "
                      "supported"});
  expectError([&] { load(edited("\"merges\": [", "\"merges\": 7, \"x\": [")); },
              {file + "model.merges is not an array"});
  expectError([&] { load(edited("\"merges\": [", "\"merges\": [\"a\", ")); },
              {file + "model.merges[0] is not \"a b\""});
  expectError([&] { load(edited("\"merges\": [", "\"merges\": [7, ")); },
              {file + "model.merges[0] is neither \"a b\" nor [\"a\", \"b\"]"});
  expectError([&] { load(edited("\"merges\": [", "\"merges\": [\"q zz\", ")); },
              {file + "model.merges[0] \"zz\" is not in model.vocab"});
  expectError([&] { load(edited("\"merges\": [",
                                "\"merges\": [[\"Ġ\", \"Ġ\"], ")); },
              {file + "model.merges[1] repeats model.merges[0]"});
  expectError([&] { load(edited("\"vocab\": {", "\"vocab\": {\"zz\": -1, ")); },
              {file + "model.vocab: token \"zz\" has id -1"});
  expectError([&] { load(edited("\"added_tokens\": [",
                                "\"added_tokens\": 3, \"x\": [")); },
              {file + "added_tokens is not an array"});
  expectError([&] { load(edited("\"id\": 420,", "\"id\": \"x\",")); },
              {file + "added_tokens[0] needs an integer id and a non-empty "
                      "content"});
  expectError([&] { load(edited("\"id\": 420,", "\"id\": -4,")); },
              {file + "added_tokens[0] has id -4"});
  expectError([&] { load(edited("\"id\": 420,", "\"id\": 1,")); },
              {file + "added_tokens[0] \"<|begin_of_text|>\" has id 1, which "
                      "model.vocab gives to other bytes"});
  expectError([&] { load(edited("\"id\": 421,", "\"id\": 420,")); },
              {file + "added_tokens[1] has the id 420 of another added token"});
  expectError([&] { load(write("tokenizer.json", "[1, 2]")); },
              {file + "expected a JSON object, not array"});
  expectError([&] { load(write("tokenizer.json", "{\"model\": ")); },
              {file + "malformed JSON"});
}

// ---------------------------------------------------------------- factory

TEST(MakeTokenizer, ByKind) {
  using Choice = mtok::TokenizerChoice;
  EXPECT_EQ(mtok::makeTokenizer(Choice{})->vocabSize(), 256);
  EXPECT_EQ(mtok::makeTokenizer(Choice{"gpt2", kVocab, kMerges, ""})
                ->vocabSize(),
            294);
  EXPECT_EQ(mtok::makeTokenizer(Choice{"hf", "", "", kLlama3Json})
                ->vocabSize(),
            422);
  expectError([] { mtok::makeTokenizer(Choice{"bpe", "", "", ""}); },
              {"unknown tokenizer \"bpe\" (expected byte, gpt2 or hf)"});
  expectError([] { mtok::makeTokenizer(Choice{"gpt2", kVocab, "", ""}); },
              {"the gpt2 tokenizer needs both a vocab.json and a merges.txt"});
  expectError([] { mtok::makeTokenizer(Choice{"byte", kVocab, "", ""}); },
              {"the byte tokenizer takes no vocab.json, merges.txt or "
               "tokenizer.json"});
  expectError(
      [] { mtok::makeTokenizer(Choice{"gpt2", kVocab, kMerges, kLlama3Json}); },
      {"not a tokenizer.json (that is --tokenizer hf)"});
  expectError([] { mtok::makeTokenizer(Choice{"hf", "", "", ""}); },
              {"the hf tokenizer needs a tokenizer.json"});
  expectError([] { mtok::makeTokenizer(Choice{"hf", kVocab, "", kLlama3Json}); },
              {"not vocab.json or merges.txt (those are --tokenizer gpt2)"});
}

// ---------------------------------------------------------------- files

class TokenFile : public TempDir {};

TEST_F(TokenFile, WritesTheLlmcLayout) {
  const std::vector<int32_t> tokens = {0, 1, 65535, 258};
  mtok::writeTokenFile(path("t.bin"), tokens, mtok::kTokens16);
  const std::string bytes = readAll(path("t.bin"));
  ASSERT_EQ(bytes.size(), 256u * 4 + 2 * tokens.size());
  const auto int32At = [&](size_t i) {
    int32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  };
  EXPECT_EQ(int32At(0), 20240520);
  EXPECT_EQ(int32At(1), 1);
  EXPECT_EQ(int32At(2), 4);
  for (size_t i = 3; i < 256; ++i)
    EXPECT_EQ(int32At(i), 0);
  EXPECT_EQ(bytes.substr(1024), std::string("\0\0\1\0\xFF\xFF\x02\x01", 8));
  EXPECT_EQ(mtok::readTokenFile(path("t.bin")), tokens);
  EXPECT_FALSE(fs::exists(path("t.bin.tmp")));
  mtok::writeTokenFile(path("empty.bin"), {}, mtok::kTokens16);
  EXPECT_TRUE(mtok::readTokenFile(path("empty.bin")).empty());
}

TEST_F(TokenFile, RefusesIdsBeyondUint16AndKeepsTheOldFile) {
  mtok::writeTokenFile(path("t.bin"), {7}, mtok::kTokens16);
  const std::string before = readAll(path("t.bin"));
  expectError([&] {
    mtok::writeTokenFile(path("t.bin"), {1, 2, 65536}, mtok::kTokens16);
  },
              {"tokens " + path("t.bin") + ": token at position 2 has id "
               "65536, which does not fit the 16-bit (llm.c gpt-2) file's "
               "tokens (0..65535)"});
  expectError([&] { mtok::writeTokenFile(path("t.bin"), {-1}, mtok::kTokens32); },
              {"token at position 0 has id -1"});
  EXPECT_EQ(readAll(path("t.bin")), before);
  EXPECT_FALSE(fs::exists(path("t.bin.tmp")));
  expectError([&] {
    mtok::writeTokenFile(path("no/dir/t.bin"), {1}, mtok::kTokens16);
  },
              {"cannot write " + path("no/dir/t.bin.tmp") +
               ": No such file or directory"});
}

TEST(TokenFileHeader, RefusesAnUnknownMagic) {
  int32_t header[mtok::kTokenFileHeaderInts] = {20240000, 1, 0};
  expectError([&] { mtok::checkedHeader(header, 1024); },
              {"bad llm.c header: unknown magic 20240000 (expected 20240520 "
               "or 20240801)"});
}

TEST_F(TokenFile, ReadErrorsNameTheFile) {
  mtok::writeTokenFile(path("t.bin"), {1, 2, 3}, mtok::kTokens16);
  const std::string good = readAll(path("t.bin"));
  const std::string tokensOf = "tokens " + path("x.bin") + ": ";
  const auto readBytes = [&](const std::string &bytes) {
    mtok::readTokenFile(write("x.bin", bytes));
  };
  expectError([&] { mtok::readTokenFile(path("none.bin")); },
              {"tokens " + path("none.bin") + ": cannot open"});
  expectError([&] { readBytes(good.substr(0, 100)); },
              {tokensOf + "not an llm.c token file"});
  expectError([&] { readBytes("x" + good.substr(1)); },
              {tokensOf + "not an llm.c token file"});
  std::string version = good;
  version[4] = 2;
  expectError([&] { readBytes(version); },
              {tokensOf + "bad llm.c header: unsupported version 2 of the "
                          "16-bit (llm.c gpt-2) layout (expected 1)"});
  expectError([&] { readBytes(good + "\1"); },
              {tokensOf + "bad llm.c header: it says 3 tokens but the file "
                          "holds 7 bytes of 16-bit (llm.c gpt-2) tokens"});
}

// Llama 3's vocabulary (128,256 ids) needs llm.c's 32-bit layout: magic
// 20240801, version 7, uint32 tokens; each layout picks its width.
TEST_F(TokenFile, WritesAndReadsThe32BitLayout) {
  const std::vector<int32_t> tokens = {0, 65536, 128255, 7};
  mtok::writeTokenFile(path("t.bin"), tokens, mtok::kTokens32);
  const std::string bytes = readAll(path("t.bin"));
  ASSERT_EQ(bytes.size(), 256u * 4 + 4 * tokens.size());
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], 4);
  EXPECT_EQ(bytes.substr(1024, 8), std::string("\0\0\0\0\0\0\1\0", 8));
  EXPECT_EQ(mtok::readTokenFile(path("t.bin")), tokens);
  EXPECT_EQ(&mtok::layoutForVocabulary(65536), &mtok::kTokens16);
  EXPECT_EQ(&mtok::layoutForVocabulary(65537), &mtok::kTokens32);
  EXPECT_EQ(&mtok::layoutForVocabulary(128256), &mtok::kTokens32);
  std::string odd = bytes + "\1\2";
  expectError([&] { mtok::readTokenFile(write("x.bin", odd)); },
              {"bad llm.c header: it says 4 tokens but the file holds 18 "
               "bytes of 32-bit (llm.c llama-3) tokens"});
}

} // namespace
