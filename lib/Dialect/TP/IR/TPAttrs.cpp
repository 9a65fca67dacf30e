//===- TPAttrs.cpp - #tp.sharding and the tp enums ------------------------===//
#include "megatron/Dialect/TP/IR/TP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tp;

#include "megatron/Dialect/TP/IR/TPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "megatron/Dialect/TP/IR/TPAttrs.cpp.inc"

void TPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "megatron/Dialect/TP/IR/TPAttrs.cpp.inc"
      >();
}

/// `<@mesh, [[...], ...] (, partial = [...])? (, sections = [...])?>`
Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  ArrayAttr dims, partial;
  SmallVector<int64_t> sections;
  if (parser.parseLess() || parser.parseAttribute(mesh) ||
      parser.parseComma() || parser.parseAttribute(dims))
    return {};
  while (succeeded(parser.parseOptionalComma())) {
    StringRef keyword;
    llvm::SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&keyword) || parser.parseEqual())
      return {};
    if (keyword == "partial" && !partial) {
      if (parser.parseAttribute(partial))
        return {};
    } else if (keyword == "sections" && sections.empty()) {
      if (parser.parseCommaSeparatedList(
              AsmParser::Delimiter::Square,
              [&] { return parser.parseInteger(sections.emplace_back()); }))
        return {};
    } else {
      parser.emitError(loc, "expected 'partial' or 'sections' (each once)");
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(parser.getContext(), mesh, dims,
                                         partial, sections);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", " << getDims();
  if (getPartial())
    printer << ", partial = " << getPartial();
  if (!getSections().empty()) {
    printer << ", sections = [";
    llvm::interleaveComma(getSections(), printer);
    printer << "]";
  }
  printer << ">";
}

/// Collects the axis names of `axes`, which must be an array of strings.
static LogicalResult
collectAxes(function_ref<InFlightDiagnostic()> emitError, Attribute axes,
            StringRef what, SmallVectorImpl<StringRef> &names) {
  auto array = dyn_cast<ArrayAttr>(axes);
  if (!array)
    return emitError() << what << " must be a list of mesh axis names";
  for (Attribute axis : array) {
    auto name = dyn_cast<StringAttr>(axis);
    if (!name)
      return emitError() << what << " must be a list of mesh axis names";
    names.push_back(name.getValue());
  }
  return success();
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   ArrayAttr partial,
                                   ArrayRef<int64_t> sections) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  SmallVector<StringRef> axes;
  for (auto [index, dim] : llvm::enumerate(dims))
    if (failed(collectAxes(emitError, dim,
                           "dimension " + std::to_string(index), axes)))
      return failure();
  if (partial && failed(collectAxes(emitError, partial, "partial", axes)))
    return failure();
  if (!sections.empty() && sections.size() != dims.size())
    return emitError() << "sections has " << sections.size()
                       << " entries for " << dims.size() << " dimensions";
  if (llvm::any_of(sections, [](int64_t count) { return count < 1; }))
    return emitError() << "sections must be positive";
  llvm::StringSet<> seen;
  for (StringRef axis : axes)
    if (!seen.insert(axis).second)
      return emitError() << "mesh axis \"" << axis
                         << "\" is used more than once in one sharding";
  return success();
}

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  if (axes)
    for (Attribute axis : axes)
      names.push_back(cast<StringAttr>(axis).getValue());
  return names;
}

SmallVector<StringRef> ShardingAttr::getDimAxes(unsigned dim) const {
  return axisNames(cast<ArrayAttr>(getDims()[dim]));
}

SmallVector<StringRef> ShardingAttr::getPartialAxes() const {
  return axisNames(getPartial());
}

int64_t ShardingAttr::getDimSections(unsigned dim) const {
  return getSections().empty() ? 1 : getSections()[dim];
}

bool ShardingAttr::usesAxis(StringRef axis) const {
  if (llvm::is_contained(getPartialAxes(), axis))
    return true;
  for (unsigned dim = 0, e = getDims().size(); dim < e; ++dim)
    if (llvm::is_contained(getDimAxes(dim), axis))
      return true;
  return false;
}

bool ShardingAttr::isReplicated() const {
  if (!getPartialAxes().empty())
    return false;
  return llvm::all_of(getDims(), [](Attribute dim) {
    return cast<ArrayAttr>(dim).empty();
  });
}

/// `<normal, 2.000000e-02>` or `<constant, 1.000000e+00>`.
Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  llvm::SMLoc loc = parser.getCurrentLocation();
  double value;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc, "expected 'normal' or 'constant'");
    return {};
  }
  if (parser.parseComma() || parser.parseFloat(value) || parser.parseGreater())
    return {};
  return parser.getChecked<InitAttr>(parser.getContext(), *kind,
                                     llvm::APFloat(value));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind()) << ", ";
  // printFloat round-trips the double exactly (the runtime draws from it).
  printer.printFloat(getValue());
  printer << ">";
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat std) {
  double value = std.convertToDouble();
  if (!std::isfinite(value))
    return emitError() << "#tp.init value must be finite";
  if (kind == InitKind::normal && value < 0)
    return emitError() << "#tp.init<normal> needs a non-negative std, got "
                       << value;
  return success();
}

LogicalResult LayerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t index) {
  if (index < 0)
    return emitError() << "#tp.layer index must be non-negative, got "
                       << index;
  return success();
}
