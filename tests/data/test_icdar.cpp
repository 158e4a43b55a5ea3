// data/icdar.h: the official files' byte order mark and CRLF, transcriptions with commas, "###",
// and errors naming file and line.
#include <gtest/gtest.h>

#include <string>

#include "data/icdar.h"

namespace aim::data {
namespace {

TEST(Icdar, ParsesWordsAndDontCare) {
  const std::vector<IcdarWord> w = parse_icdar_gt(
      "\xEF\xBB\xBF"
      "377,117,463,117,465,130,378,130,Genaxis Theatre\r\n"
      "493,115,519,115,519,131,493,131,[06]\r\n\r\n"
      "374,155,409,155,409,170,374,170,###\r\n"
      "10.5,20,30,20,30,40,10,40,a,b,c\r\n",
      "gt_img_1.txt");
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].text, "Genaxis Theatre");
  EXPECT_EQ(w[0].quad[0], 377);
  EXPECT_EQ(w[0].quad[7], 130);
  EXPECT_FALSE(w[0].dont_care);
  EXPECT_TRUE(w[2].dont_care);
  EXPECT_EQ(w[2].line, 4);
  EXPECT_EQ(w[3].text, "a,b,c");
  EXPECT_EQ(w[3].quad[0], 10.5);
}

TEST(Icdar, ErrorsNameFileAndLine) {
  auto error_of = [](const std::string& s) -> std::string {
    try {
      parse_icdar_gt(s, "gt_img_7.txt");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error_of("1,2,3,4,5,6,7,8,ok\n1,2,3\n").find("gt_img_7.txt:2: expected 8 coordinates"),
            std::string::npos);
  EXPECT_NE(error_of("1,2,x,4,5,6,7,8,t\n").find("gt_img_7.txt:1: coordinate 3 is 'x'"),
            std::string::npos);
  EXPECT_NE(error_of("1,2,3,4,5,6,7,8\n").find("found 8 fields"), std::string::npos);
}

}  // namespace
}  // namespace aim::data
