#ifndef BINDER_CLIBXML2_SHIM_H
#define BINDER_CLIBXML2_SHIM_H
/*
 * libxml2's pull reader (xmlTextReader), for `binder import`'s C-CDA documents. BinderImport's
 * XMLReader is its one user. Foundation's XMLParser sat here before; it trapped or crashed on
 * hostile documents (a name not UTF-8; a processing instruction with no data, whose NULL it
 * handed to strlen), so the reader is called directly and every string it returns is checked.
 */
/* Debian's libxml2 is built with ICU, so its encoding.h includes <unicode/ucnv.h> from
 * libicu-dev, whose UErrorCode differs from the one in Foundation's own _FoundationICU module;
 * a module importing both Foundation and this one then fails to compile ("'UErrorCode' has
 * different definitions in different modules"; it failed so on CI's clean build). Only the
 * layout of xmlCharEncodingHandler depends on the macro (two trailing ICU converter pointers),
 * a struct nothing here allocates or reads; the reader's API takes it by pointer if at all. */
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>

/* The first error libxml2 reports while reading one document (warnings are dropped). */
struct binder_xml_first_error {
    int seen;
    int code;    /* xmlParserErrors */
    int line;
    int column;
};

static inline void binder_xml_note_error(void *arg, xmlErrorPtr error) {
    struct binder_xml_first_error *first = (struct binder_xml_first_error *)arg;
    if (first == NULL || error == NULL || first->seen || error->level < XML_ERR_ERROR) return;
    first->seen = 1;
    first->code = error->code;
    first->line = error->line;
    first->column = error->int2;
}

/* Routes the reader's errors and warnings to `first` instead of stderr. `first` must outlive
 * the reader. */
static inline void binder_xml_route_errors(xmlTextReaderPtr reader, struct binder_xml_first_error *first) {
    xmlTextReaderSetStructuredErrorHandler(reader, binder_xml_note_error, first);
}

static inline void binder_xml_ignore_message(void *context, const char *message, ...) {
    (void)context;
    (void)message;
}

/* libxml2 reports some errors outside any reader (an encoding it cannot convert: "input
 * conversion failed due to input error, bytes 0x..", quoting four of the document's bytes)
 * through its per-thread handlers, which print to stderr by default: to the terminal, or to a
 * mount's log. While a document is read on this thread they go to `first` too, and the
 * unstructured ones nowhere; `binder_xml_release_thread_errors` detaches `first` again. */
static inline void binder_xml_route_thread_errors(struct binder_xml_first_error *first) {
    xmlSetGenericErrorFunc(NULL, binder_xml_ignore_message);
    xmlSetStructuredErrorFunc(first, binder_xml_note_error);
}

static inline void binder_xml_release_thread_errors(void) {
    xmlSetStructuredErrorFunc(NULL, NULL);
}

#endif
