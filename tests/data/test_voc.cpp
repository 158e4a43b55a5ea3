// data/xml.h and data/voc.h: a VOC2007-style annotation (comments, declaration, entities,
// difficult and truncated flags), and the errors for malformed XML, missing fields, unknown
// classes, boxes outside the image (or clipped on request) and degenerate boxes.
#include <gtest/gtest.h>

#include <string>

#include "data/voc.h"
#include "data/xml.h"

namespace aim::data {
namespace {

const char* kGood = R"(<?xml version="1.0"?>
<annotation>
  <folder>VOC2007</folder>
  <filename>000005.jpg</filename>
  <!-- a comment -->
  <source><database>The VOC2007 Database</database></source>
  <size><width>500</width><height>375</height><depth>3</depth></size>
  <segmented>0</segmented>
  <object>
    <name>chair</name><pose>Rear</pose><truncated>0</truncated><difficult>0</difficult>
    <bndbox><xmin>263</xmin><ymin>211</ymin><xmax>324</xmax><ymax>339</ymax></bndbox>
  </object>
  <object>
    <name> pottedplant </name><truncated>1</truncated><difficult>1</difficult>
    <bndbox><xmin>1</xmin><ymin>1.0</ymin><xmax>500</xmax><ymax>375</ymax></bndbox>
  </object>
</annotation>
)";

std::string error_of(const std::string& xml, VocReadOptions o = {}) {
  try {
    parse_voc_annotation(xml, "a.xml", o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Voc, ReadsAnAnnotation) {
  const VocAnnotation a = parse_voc_annotation(kGood, "000005.xml");
  EXPECT_EQ(a.filename, "000005.jpg");
  EXPECT_EQ(a.width, 500);
  EXPECT_EQ(a.height, 375);
  ASSERT_EQ(a.objects.size(), 2u);
  EXPECT_EQ(a.objects[0].name, "chair");
  EXPECT_EQ(a.objects[0].label, 9);
  EXPECT_FALSE(a.objects[0].difficult);
  EXPECT_EQ(a.objects[0].xmin, 263);
  EXPECT_EQ(a.objects[0].ymax, 339);
  EXPECT_EQ(a.objects[1].label, 16);
  EXPECT_TRUE(a.objects[1].difficult);
  EXPECT_TRUE(a.objects[1].truncated);
  EXPECT_EQ(a.objects[1].line, 13);
}

TEST(Voc, XmlEntitiesCdataAndAttributes) {
  const auto root = parse_xml(
      "<a x='1' y=\"&lt;2&gt;\"><b>R&amp;D &#233;&#x41;</b><c/><![CDATA[<raw>]]></a>", "t.xml");
  EXPECT_EQ(root->attributes.at("y"), "<2>");
  EXPECT_EQ(root->find("b")->text,
            "R&D \xC3\xA9"
            "A");
  EXPECT_NE(root->find("c"), nullptr);
  EXPECT_EQ(root->text, "<raw>");
}

TEST(Voc, ErrorsNameFileLineAndElement) {
  EXPECT_NE(error_of(replace(kGood, "</size>", "</siz>")).find("a.xml:7: </siz> closes <size>"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "</annotation>", "")).find("<annotation> is not closed"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "<name>chair</name>", "<name>chare</name>"))
                .find("a.xml:9: <object> class 'chare' is not one of VOC's 20 classes"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kGood, "<xmax>324</xmax>", "<xmax>3x4</xmax>"))
                .find("<xmax> must be a number, got '3x4'"),
            std::string::npos);
  EXPECT_NE(
      error_of(replace(kGood, "<width>500</width>", "")).find("a.xml:7: <size> has no <width>"),
      std::string::npos);
  EXPECT_NE(
      error_of(replace(kGood, "<xmax>324</xmax>", "<xmax>200</xmax>")).find("has a degenerate box"),
      std::string::npos);
  const std::string outside = replace(kGood, "<xmax>324</xmax>", "<xmax>501</xmax>");
  EXPECT_NE(error_of(outside).find("lies outside the 500x375 image"), std::string::npos);
  VocReadOptions clip;
  clip.clip_boxes = true;
  int64_t clipped = 0;
  const VocAnnotation a = parse_voc_annotation(outside, "a.xml", clip, &clipped);
  EXPECT_EQ(clipped, 1);
  EXPECT_EQ(a.objects[0].xmax, 500);
  EXPECT_NE(error_of("<annotation><size>").find("is not closed"), std::string::npos);
  EXPECT_NE(error_of("<!DOCTYPE x><annotation/>").find("DTDs"), std::string::npos);
  EXPECT_NE(error_of("<annotation a=1/>").find("expected a quoted value"), std::string::npos);
  EXPECT_NE(error_of("<annotation>&bogus;</annotation>").find("unknown entity '&bogus;'"),
            std::string::npos);
  EXPECT_NE(error_of("<annotation></annotation><x/>").find("expected the end of the document"),
            std::string::npos);
  try {
    read_voc_annotation("/nonexistent/x.xml");
    ADD_FAILURE();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.xml: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace aim::data
