/*
 * Fuzz what the aws driver reads from AWS (drivers/aws/aws_api.h): an
 * answer's body decoded by aws_answer_parse as EC2/S3 XML or Service
 * Quotas JSON, for a success and an error status, and a successful XML
 * document walked the way the adapter walks DescribeInstances,
 * DescribeImages, CreateFleet and import task answers. Input byte 0 picks
 * the status and kind; the rest is the body.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

/* the fuzz build links lib/ and protocol/ only: compile the driver's API
 * layer in */
#include "drivers/aws/aws_api.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
walk(const xmlNode *root)
{
	static const char *const item_paths[] = {
	    "instanceId",
	    "instanceState/name",
	    "privateIpAddress",
	    "ipAddress",
	    "placement/availabilityZone",
	    "instanceType",
	    "instanceLifecycle",
	    "stateReason/message",
	    "networkInterfaceSet/item/ipv6AddressesSet/item/ipv6Address"};
	const xmlNode *res, *it, *t;
	char buf[256];
	size_t i;

	for (res = aws_xpath(root, "reservationSet/item"); res != NULL; res = aws_xnext(res))
		for (it = aws_xpath(res, "instancesSet/item"); it != NULL; it = aws_xnext(it)) {
			for (i = 0; i < sizeof(item_paths) / sizeof(item_paths[0]); i++)
				if (strlen(aws_xtext(it, item_paths[i], buf, sizeof(buf))) >=
				    sizeof(buf))
					abort();
			for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t)) {
				aws_xtext(t, "key", buf, sizeof(buf));
				aws_xtext(t, "value", buf, sizeof(buf));
			}
		}
	for (it = aws_xpath(root, "imagesSet/item"); it != NULL; it = aws_xnext(it))
		aws_xtext(it, "creationDate", buf, sizeof(buf));
	aws_xtext(root, "fleetInstanceSet/item/instanceIds/item", buf, sizeof(buf));
	aws_xtext(root, "errorSet/item/errorCode", buf, sizeof(buf));
	aws_xtext(root, "importSnapshotTaskSet/item/snapshotTaskDetail/status", buf, sizeof(buf));
	aws_xtext(root, "nextToken", buf, sizeof(buf));
	/* dedicated hosts */
	aws_xtext(root, "hostIdSet/item", buf, sizeof(buf));
	aws_xtext(root, "hostSet/item/state", buf, sizeof(buf));
	aws_xtext(root, "unsuccessful/item/error/code", buf, sizeof(buf));
	aws_xtext(root, "unsuccessful/item/error/message", buf, sizeof(buf));
	/* leak listings: images' snapshots, import tasks' tags, S3 objects */
	for (it = aws_xpath(root, "imagesSet/item"); it != NULL; it = aws_xnext(it))
		aws_xtext(it, "blockDeviceMapping/item/ebs/snapshotId", buf, sizeof(buf));
	for (it = aws_xpath(root, "importSnapshotTaskSet/item"); it != NULL; it = aws_xnext(it)) {
		aws_xtext(it, "snapshotTaskDetail/snapshotId", buf, sizeof(buf));
		for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
			aws_xtext(t, "key", buf, sizeof(buf));
	}
	for (it = aws_xpath(root, "Contents"); it != NULL; it = aws_xnext(it))
		aws_xtext(it, "Key", buf, sizeof(buf));
	aws_xtext(root, "IsTruncated", buf, sizeof(buf));
	aws_xtext(root, "NextContinuationToken", buf, sizeof(buf));
	for (t = aws_xpath(root, "TagSet/Tag"); t != NULL; t = aws_xnext(t)) {
		aws_xtext(t, "Key", buf, sizeof(buf));
		aws_xtext(t, "Value", buf, sizeof(buf));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {200, 400, 403, 500, 503};
	char code[128], msg[512];
	xmlDoc *doc;
	int status, xml;

	if (size < 1)
		return 0;
	status = statuses[data[0] % 5];
	xml = (data[0] / 5) % 2 == 0;
	doc = aws_answer_parse(status, (const char *)data + 1, size - 1, xml, code, sizeof(code),
			       msg, sizeof(msg));
	if (doc != NULL) {
		if (status != 200 || code[0] != '\0')
			abort();
		walk(xmlDocGetRootElement(doc));
		xmlFreeDoc(doc);
	} else if (status != 200 && code[0] == '\0') {
		abort(); /* an error answer always has a code */
	}
	return 0;
}
