/**
 * Tag keys the lab puts on what it launches, shared by the stack and the commands that look for
 * the lab's resources outside CloudFormation (`lab teardown` finds orphan instances by them).
 */

/** On every instance the lab launches; the value is the stack's name. */
export const STACK_TAG_KEY = 'llm-gateway-lab:stack';

/**
 * On every instance the lab launches; the value is the capacity launch's Generation (what the
 * host boots with). A repeated launch request adopts a live instance carrying this stack's tag
 * and this generation instead of launching a second one.
 */
export const GENERATION_TAG_KEY = 'llm-gateway-lab:generation';

/**
 * On every instance a capacity launch starts; the value is the CloudFormation logical id of the
 * launching resource. A Delete whose physical id is not an instance (a cancelled create) finds
 * what that resource may have launched by this tag and the stack tag.
 */
export const RESOURCE_TAG_KEY = 'llm-gateway-lab:resource';
