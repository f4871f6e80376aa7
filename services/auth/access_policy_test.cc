#include "services/auth/access_policy.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace convstate::auth {
namespace {

std::string TokenEntry(const std::string& name, const std::string& tenant, const std::string& role,
                       const std::string& salt, const std::string& token) {
  return absl::StrCat("tokens { name: '", name, "' tenant: '", tenant, "' role: ", role,
                      " salt: '", salt, "' sha256: '", TokenDigest(salt, token), "' }\n");
}

TEST(AccessPolicyTest, TokensMapToTheirTenantAndRole) {
  const std::string text =
      TokenEntry("acme-gw", "acme", "ROLE_GATEWAY", "s1", "secret-one") +
      TokenEntry("globex-ops", "globex", "ROLE_OPERATOR", "s2", "secret-two") +
      TokenEntry("plain", "", "ROLE_READER", "s3", "secret-three");
  auto policy = AccessPolicy::FromText(text);
  ASSERT_TRUE(policy.ok()) << policy.status();
  const Principal* gw = (*policy)->FindToken("secret-one");
  ASSERT_NE(gw, nullptr);
  EXPECT_EQ(gw->name, "acme-gw");
  EXPECT_EQ(gw->tenant, "acme");
  EXPECT_EQ(gw->role, Role::kGateway);
  const Principal* ops = (*policy)->FindToken("secret-two");
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->role, Role::kOperator);
  // A second lookup of the same token finds the same entry.
  EXPECT_EQ((*policy)->FindToken("secret-two"), ops);
  const Principal* plain = (*policy)->FindToken("secret-three");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->tenant, "default");
  EXPECT_EQ((*policy)->FindToken("secret-on"), nullptr);
  EXPECT_EQ((*policy)->FindToken(""), nullptr);
  // The salt is part of the hash: the digest of the bare token is not it.
  EXPECT_EQ((*policy)->FindToken(absl::StrCat("s1", "secret-one")), nullptr);
}

TEST(AccessPolicyTest, CertificatesMapByAnyOfTheirIdentities) {
  auto policy = AccessPolicy::FromText(
      "certificates { identity: 'gw.acme.example' tenant: 'acme' role: ROLE_GATEWAY }\n"
      "certificates { identity: 'spiffe://acme/ops' tenant: 'acme' role: ROLE_OPERATOR "
      "name: 'acme-ops' }\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  const Principal* gw = (*policy)->FindCertificate({"client", "gw.acme.example"});
  ASSERT_NE(gw, nullptr);
  EXPECT_EQ(gw->name, "gw.acme.example");
  const Principal* ops = (*policy)->FindCertificate({"spiffe://acme/ops"});
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->name, "acme-ops");
  EXPECT_EQ(ops->role, Role::kOperator);
  EXPECT_EQ((*policy)->FindCertificate({"stranger"}), nullptr);
}

TEST(AccessPolicyTest, TenantsCarryTheirLimits) {
  auto policy = AccessPolicy::FromText(
      "tenants { id: 'acme' max_conversations: 3 max_stored_bytes: 1000 "
      "max_requests_per_second: 2.5 burst: 5 }");
  ASSERT_TRUE(policy.ok()) << policy.status();
  const TenantLimits acme = (*policy)->Limits("acme");
  EXPECT_EQ(acme.max_conversations, 3);
  EXPECT_EQ(acme.max_stored_bytes, 1000);
  EXPECT_DOUBLE_EQ(acme.max_requests_per_second, 2.5);
  EXPECT_EQ(acme.burst, 5);
  const TenantLimits other = (*policy)->Limits("globex");
  EXPECT_EQ(other.max_conversations, 0);
  EXPECT_EQ(other.max_requests_per_second, 0);
}

TEST(AccessPolicyTest, MistakesAreRefusedNamingTheEntry) {
  const struct {
    const char* text;
    const char* error;
  } cases[] = {
      {"tokens { name: 'a' tenant: 'x' role: ROLE_GATEWAY salt: 's' sha256: 'abc' }",
       "tokens[0].sha256"},
      {"tokens { name: 'a' tenant: 'x' salt: 's' "
       "sha256: '0000000000000000000000000000000000000000000000000000000000000000' }",
       "tokens[0].role"},
      {"tokens { tenant: 'x' role: ROLE_GATEWAY salt: 's' "
       "sha256: '0000000000000000000000000000000000000000000000000000000000000000' }",
       "tokens[0].name"},
      {"tokens { name: 'a' tenant: 'x' role: ROLE_GATEWAY "
       "sha256: '0000000000000000000000000000000000000000000000000000000000000000' }",
       "tokens[0].salt"},
      {"tokens { name: 'a' tenant: 'no spaces' role: ROLE_GATEWAY salt: 's' "
       "sha256: '0000000000000000000000000000000000000000000000000000000000000000' }",
       "tokens[0].tenant"},
      {"certificates { identity: 'a' tenant: 'x' role: ROLE_READER }\n"
       "certificates { identity: 'a' tenant: 'y' role: ROLE_READER }",
       "certificates[1].name"},
      {"certificates { tenant: 'x' role: ROLE_READER }", "certificates[0].identity"},
      {"tenants { id: 'x' } tenants { id: 'x' }", "tenants[1].id"},
      {"tenants { id: 'x' max_conversations: -1 }", "tenants[0]."},
      {"tokens { nme: 'a' }", "line 1:"},
  };
  for (const auto& c : cases) {
    auto policy = AccessPolicy::FromText(c.text);
    ASSERT_FALSE(policy.ok()) << c.text;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(policy.status().message().find(c.error), std::string::npos)
        << policy.status() << " for " << c.text;
  }
}

TEST(AccessFileTest, AChangedFileIsReadAgainAndABrokenOneKeepsTheOldRules) {
  const std::string path = absl::StrCat(testing::TempDir(), "/access.textproto");
  auto write = [&](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
    chmod(path.c_str(), 0600);
  };
  write(TokenEntry("first", "acme", "ROLE_GATEWAY", "s", "one"));
  auto file = AccessFile::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_NE((*file)->Current()->FindToken("one"), nullptr);

  write(TokenEntry("second", "acme", "ROLE_GATEWAY", "salt-two", "two") + "\n# longer\n");
  EXPECT_EQ((*file)->Current()->FindToken("one"), nullptr);
  EXPECT_NE((*file)->Current()->FindToken("two"), nullptr);

  write("tokens { this does not parse");
  EXPECT_NE((*file)->Current()->FindToken("two"), nullptr);

  // A file that others may now write is not read again: someone could have
  // planted a token of their own.
  write(TokenEntry("planted", "acme", "ROLE_OPERATOR", "salt-three", "three") + "\n#\n");
  chmod(path.c_str(), 0622);
  EXPECT_EQ((*file)->Current()->FindToken("three"), nullptr);
  EXPECT_NE((*file)->Current()->FindToken("two"), nullptr);
  chmod(path.c_str(), 0604);
  EXPECT_FALSE(AccessFile::Open(path, absl::ZeroDuration()).ok());

  std::remove(path.c_str());
  EXPECT_FALSE(AccessFile::Open(path, absl::ZeroDuration()).ok());
}

}  // namespace
}  // namespace convstate::auth
