# pprof's profile.proto (github.com/google/pprof, proto/profile.proto) built from its published
# field numbers with python3-protobuf, without generated code, and a reader of the gzipped
# profiles `ehelf record` writes. Used by the script tests: `sys.path.insert(0, DIR)`, then
# `import pprof_profile; p = pprof_profile.load(path)`.
import gzip

from google.protobuf import descriptor_pb2, descriptor_pool
try:
    from google.protobuf.message_factory import GetMessageClass
except ImportError:
    from google.protobuf import message_factory
    GetMessageClass = lambda d: message_factory.MessageFactory(d.file.pool).GetPrototype(d)

F = descriptor_pb2.FieldDescriptorProto
fdp = descriptor_pb2.FileDescriptorProto(name='profile.proto', package='perftools.profiles',
                                         syntax='proto3')


def message(name, *fields):
    m = fdp.message_type.add(name=name)
    for fname, number, ftype, repeated, tname in fields:
        f = m.field.add(name=fname, number=number, type=ftype,
                        label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if tname:
            f.type_name = '.perftools.profiles.' + tname


I64, U64, STR, MSG, BOOL = F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_STRING, F.TYPE_MESSAGE, F.TYPE_BOOL
message('Profile', ('sample_type', 1, MSG, 1, 'ValueType'), ('sample', 2, MSG, 1, 'Sample'),
        ('mapping', 3, MSG, 1, 'Mapping'), ('location', 4, MSG, 1, 'Location'),
        ('function', 5, MSG, 1, 'Function'), ('string_table', 6, STR, 1, None),
        ('time_nanos', 9, I64, 0, None), ('duration_nanos', 10, I64, 0, None),
        ('period_type', 11, MSG, 0, 'ValueType'), ('period', 12, I64, 0, None))
message('ValueType', ('type', 1, I64, 0, None), ('unit', 2, I64, 0, None))
message('Sample', ('location_id', 1, U64, 1, None), ('value', 2, I64, 1, None),
        ('label', 3, MSG, 1, 'Label'))
message('Label', ('key', 1, I64, 0, None), ('str', 2, I64, 0, None), ('num', 3, I64, 0, None))
message('Mapping', ('id', 1, U64, 0, None), ('memory_start', 2, U64, 0, None),
        ('memory_limit', 3, U64, 0, None), ('file_offset', 4, U64, 0, None),
        ('filename', 5, I64, 0, None), ('build_id', 6, I64, 0, None),
        ('has_functions', 7, BOOL, 0, None))
message('Location', ('id', 1, U64, 0, None), ('mapping_id', 2, U64, 0, None),
        ('address', 3, U64, 0, None), ('line', 4, MSG, 1, 'Line'))
message('Line', ('function_id', 1, U64, 0, None), ('line', 2, I64, 0, None))
message('Function', ('id', 1, U64, 0, None), ('name', 2, I64, 0, None),
        ('system_name', 3, I64, 0, None), ('filename', 4, I64, 0, None))
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
Profile = GetMessageClass(pool.FindMessageTypeByName('perftools.profiles.Profile'))


def load(path):
    """The Profile message in the gzipped file at `path`."""
    p = Profile()
    p.ParseFromString(gzip.open(path).read())
    return p
